"""The retry policy of a send, sans-IO: one home for the sync and the async paths.

Mirrors the loop of DefaultMQProducerImpl.sendDefaultImpl, RocketMQ 4.9.x: up to 1 +
retryTimesWhenSendFailed attempts (one when the caller chose the queue), each on a queue chosen
away from the broker of the attempt before; the call is over once its time is spent (callTimeout)
before an attempt starts; a broker error retries only for the retry codes, any other client
error (no answer, a connection refused, the broker's address unknown, a bad answer) retries; an
answer that is stored but not SEND_OK is retried on another broker when
retryAnotherBrokerWhenNotStoreOK is set, and is what the caller gets when nothing better came.
The caller owns the I/O and the fault-tolerance bookkeeping; this object only decides.
"""

from __future__ import annotations

from typing import Final

from actors.client.errors import ClientClosedError, ClientErrorCode, MQBrokerError, MQClientError
from actors.client.records import SendResult, SendStatus
from protocol.codes import SEND_RETRY_CODES, ResponseCode

# Java's retryResponseCodes plus SYSTEM_BUSY: the broker's fast failure (a request that waited
# too long in its queue) asks the client to come back, so it is retried within the deadline.
RETRY_CODES: Final = SEND_RETRY_CODES | {ResponseCode.SYSTEM_BUSY}


class SendRetry:
    """One send's attempts: start() each, then answered() or failed(); outcome() at the end."""

    __slots__ = ("attempts", "begin", "call_timeout", "error", "last_broker", "result",
                 "sent_to", "timeout_ms", "topic", "tried")  # fmt: skip

    def __init__(self, topic: str, attempts: int, timeout_ms: float, begin: float) -> None:
        self.topic = topic
        self.attempts = attempts
        self.timeout_ms = timeout_ms
        self.begin = begin  # time.monotonic() when the send began
        self.tried = 0
        self.last_broker: str | None = None  # the broker of the attempt before (selection)
        self.sent_to: list[str] = []
        self.error: MQClientError | None = None
        self.result: SendResult | None = None  # a stored answer that was not SEND_OK
        self.call_timeout = False

    def more(self) -> bool:
        """Whether another attempt may start."""
        return self.tried < self.attempts and not self.call_timeout

    def start(self, broker_name: str, now: float) -> float | None:
        """An attempt on `broker_name` begins: the ms it may take, or None when the call's time
        is spent (the send is over: outcome())."""
        self.tried += 1
        self.last_broker = broker_name
        cost_ms = (now - self.begin) * 1000.0
        if cost_ms >= self.timeout_ms:
            self.call_timeout = True
            return None
        self.sent_to.append(broker_name)
        return self.timeout_ms - cost_ms

    def answered(self, result: SendResult, retry_another_broker: bool) -> bool:
        """The attempt got a stored answer; True when the send is over with it."""
        if result.status is SendStatus.SEND_OK or not retry_another_broker:
            return True
        self.result = result
        return not self.more()

    def failed(self, error: MQClientError) -> bool:
        """The attempt failed; True when another attempt may follow (if any is left)."""
        self.error = error
        if isinstance(error, ClientClosedError):
            return False
        if isinstance(error, MQBrokerError):
            return error.code in RETRY_CODES
        return True

    def outcome(self, now: float) -> SendResult | MQClientError:
        """What the caller gets once no attempt follows: the stored answer if one came, else
        the error (callTimeout's, or "Send [n] times, still failed" around the last error)."""
        if self.result is not None:
            return self.result
        error = self.error
        cost = int((now - self.begin) * 1000)
        detail = error.message if error is not None else ""
        if self.call_timeout:
            err = MQClientError(
                ClientErrorCode.ACCESS_BROKER_TIMEOUT,
                f"sendDefaultImpl call timeout: no answer within {cost} ms (Topic: {self.topic}, "
                f"BrokersSent: {self.sent_to}): {detail}")  # fmt: skip
            err.__cause__ = error
            return err
        if isinstance(error, MQBrokerError) and error.code not in RETRY_CODES:
            return error  # not retried: the broker's own error, as Java throws it
        if isinstance(error, ClientClosedError):
            return error
        code = error.code if error is not None else ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
        text = (f"Send [{len(self.sent_to)}] times, still failed, cost [{cost}]ms, Topic: "
                f"{self.topic}, BrokersSent: {self.sent_to}: {detail}")  # fmt: skip
        failed = MQBrokerError(code, text) if isinstance(error, MQBrokerError) else \
            MQClientError(code, text)
        failed.__cause__ = error
        return failed
