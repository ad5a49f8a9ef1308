"""Where a request a broker sends to the client goes. Pure.

Mirrors client/impl/ClientRemotingProcessor.java, RocketMQ 4.9.x: the broker calls the
connection it saw the client's heartbeats on (the instance actor's), so the instance decides
who serves each code: the consumer registered for the header's group (its owner actor, or the
user's process), or the user's process for what lives there (transaction listeners, request()
futures).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand


class Target(enum.Enum):
    """Who serves a broker request."""

    CONSUMER = 1  # the consumer registered for `group`
    USER = 2  # the user's process (producers, request() futures)
    NOBODY = 3


CONSUMER_CODES: Final = frozenset({
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
    RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,
})
USER_CODES: Final = frozenset({
    RequestCode.CHECK_TRANSACTION_STATE,
    RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
})
# Requests that are answered right away by the instance (the relay needs no answer back).
ANSWERED_HERE: Final = frozenset({RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT})
# Requests the broker sends oneway or does not wait for.
NO_ANSWER: Final = frozenset({
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
    RequestCode.CHECK_TRANSACTION_STATE,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
})


@dataclass(frozen=True, slots=True)
class Routing:
    """Where a request goes and whether an answer is owed."""

    target: Target
    group: str | None
    needs_answer: bool


def route(cmd: RemotingCommand) -> Routing:
    """Decide who serves a broker request."""
    ext = cmd.ext_fields or {}
    code = cmd.code
    oneway = bool(cmd.flag & 2)
    if code in CONSUMER_CODES:
        group = ext.get("consumerGroup") or ext.get("group")
        return Routing(Target.CONSUMER, group, not oneway and code not in NO_ANSWER)
    if code in USER_CODES:
        return Routing(Target.USER, None, not oneway and code not in NO_ANSWER
                       and code not in ANSWERED_HERE)  # fmt: skip
    return Routing(Target.NOBODY, None, not oneway)


def not_supported(cmd: RemotingCommand) -> RemotingCommand:
    """REQUEST_CODE_NOT_SUPPORTED for a code no client part serves."""
    return cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                             f" request type {cmd.code} not supported")


def no_consumer(cmd: RemotingCommand, group: str | None) -> RemotingCommand:
    """SYSTEM_ERROR: the group is not served by this client (Java's wording)."""
    return cmd.make_response(ResponseCode.SYSTEM_ERROR,
                             f"The Consumer Group <{group}> not exist in this consumer")
