"""Client exceptions: MQClientError, MQBrokerError and the remoting failures.

Mirrors client/exception/MQClientException.java, MQBrokerException.java,
remoting/exception/Remoting*Exception.java and common/help/ClientErrorCode, RocketMQ 4.9.x.
Every exception the client raises is an MQClientError with a `code` (a ResponseCode from a
broker, or a ClientErrorCode).
"""

from __future__ import annotations

from typing import Final


class ClientErrorCode:
    """Codes of client-side failures (Java's ClientErrorCode)."""

    CONNECT_BROKER_EXCEPTION: Final = 10001
    ACCESS_BROKER_TIMEOUT: Final = 10002
    BROKER_NOT_EXIST_EXCEPTION: Final = 10003
    NO_NAME_SERVER_EXCEPTION: Final = 10004
    NOT_FOUND_TOPIC_EXCEPTION: Final = 10005
    REQUEST_TIMEOUT_EXCEPTION: Final = 10006
    CREATE_REPLY_MESSAGE_EXCEPTION: Final = 10007
    # ours
    INFLIGHT_LIMIT: Final = 10100
    CLIENT_CLOSED: Final = 10101
    ILLEGAL_ARGUMENT: Final = -1  # Java's MQClientException(-1, ...) for bad arguments


class MQClientError(Exception):
    """A client-side failure with a code (see ClientErrorCode / ResponseCode)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"CODE: {code} DESC: {message}")
        self.code = code
        self.message = message


class MQBrokerError(MQClientError):
    """A broker answered with an error code; `remark` is its explanation."""

    def __init__(self, code: int, remark: str | None, broker_addr: str | None = None) -> None:
        self.remark = remark or ""
        self.broker_addr = broker_addr
        where = f" BROKER: {broker_addr}" if broker_addr else ""
        super().__init__(code, f"{self.remark}{where}")


class RemotingError(MQClientError):
    """The request could not be carried (connection, timeout, write)."""


class RemotingConnectError(RemotingError):
    """No connection to the address."""

    def __init__(self, addr: str, detail: str = "") -> None:
        super().__init__(ClientErrorCode.CONNECT_BROKER_EXCEPTION,
                         f"connect to {addr} failed{': ' + detail if detail else ''}")
        self.addr = addr


class RemotingTimeoutError(RemotingError):
    """No response within the timeout."""

    def __init__(self, addr: str, timeout_ms: float) -> None:
        super().__init__(ClientErrorCode.ACCESS_BROKER_TIMEOUT,
                         f"wait response on {addr} timeout, {timeout_ms:.0f}(ms)")
        self.addr = addr


class RemotingSendRequestError(RemotingError):
    """The request could not be written (the connection broke)."""

    def __init__(self, addr: str, detail: str = "") -> None:
        super().__init__(ClientErrorCode.CONNECT_BROKER_EXCEPTION,
                         f"send request to {addr} failed{': ' + detail if detail else ''}")
        self.addr = addr


class MessageValidationError(MQClientError, ValueError):
    """A message, topic or group that may not be sent (too big, bad name, empty body)."""


class InflightLimitError(MQClientError):
    """max_inflight async sends are outstanding and on_full="raise"."""

    def __init__(self, limit: int) -> None:
        super().__init__(ClientErrorCode.INFLIGHT_LIMIT,
                         f"{limit} sends in flight (max_inflight); wait or raise the limit")


class ClientClosedError(MQClientError):
    """The client was closed."""

    def __init__(self, what: str = "client") -> None:
        super().__init__(ClientErrorCode.CLIENT_CLOSED, f"the {what} is closed")
