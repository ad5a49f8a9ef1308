"""The consumer side's records on the client channel (kinds 64-95; client_channel.py frames).

Mirrors nothing in RocketMQ (a Java consumer is one process): these records carry what a Java
client passes between its own threads (PullRequests to PullMessageService and PullResults
back, RebalanceImpl's queue changes, the relayed broker requests for the group) between the
consumer services (actors) and the consumer core in the user's process. The consumer core owns
the ProcessQueues, the pull requests and the flow-control gates; the pull actor keeps nothing
between a PullCommand and its answer. Every record is msgpack except PULL_RESULT, whose pull
body travels raw behind a fixed header:

    PULL 64          user -> pull actor    [PullCommand.to_row(), ...]
    PULL_RESULT 65   pull actor -> user    PULL_RESULT_HEAD, then the pull body (FOUND) or
                                           the remark / reason in UTF-8:
      offset size field
      0      4    request id
      4      1    status: 0 FOUND, 1 NO_NEW_MSG, 2 NO_MATCHED_MSG, 3 OFFSET_ILLEGAL,
                  254 the broker answered an error (code in next_begin_offset, remark below),
                  255 no answer (timeout, connection; the reason below)
      5      8    next_begin_offset
      13     8    min_offset
      21     8    max_offset
      29     8    suggest_which_broker_id
      37     ...  the pull body
    ASSIGN 70        rebalance -> user     [group, [[topic, broker, qid, locked, lock_ms], ...]]
    REVOKE 71        rebalance -> user     [group, [[topic, broker, qid], ...]]
    LOCK_STATE 72    rebalance -> user     [group, [[topic, broker, qid, locked, lock_ms], ...]]
    REVOKED 73       user -> rebalance     [group, [[topic, broker, qid], ...]]
    RELAY 74         rebalance -> user     [group, request id, broker addr, request frame]
    RELAY_ANSWER 75  user -> rebalance     [request id, response frame | None]
    PERSIST 76       rebalance -> user     [group]
    REBALANCE_NOW 77 user -> rebalance     [group]
    QUEUES 78        rebalance -> user     [group, topic, [mq_all...], [mq_divided...]]

The pull actor writes a PULL record's commands to their brokers in order, each broker's on
its one connection, so a PullCommand sent after another for the same broker reaches it after
that one (how a consumer's last commit lands after the pulls before it: PullMessageMixin).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from actors.client.client_channel import pack, unpack
from protocol.bodies import MessageQueue
from protocol.headers import PullMessageRequestHeader

PULL: Final = 64
PULL_RESULT: Final = 65
ASSIGN: Final = 70
REVOKE: Final = 71
LOCK_STATE: Final = 72
REVOKED: Final = 73
RELAY: Final = 74
RELAY_ANSWER: Final = 75
PERSIST: Final = 76
REBALANCE_NOW: Final = 77
QUEUES: Final = 78

BROKER_ERROR: Final = 254
NO_ANSWER: Final = 255

PULL_RESULT_HEAD = struct.Struct(
    ">I"  # request id
    "B"  # status (PullStatus value, 254 broker error, 255 no answer)
    "q"  # next_begin_offset (the response code when status is 254)
    "q"  # min_offset
    "q"  # max_offset
    "q"  # suggest_which_broker_id
)

__all__ = ["pack", "unpack"]


def mq_row(mq: MessageQueue) -> list[Any]:
    """A queue as a msgpack row."""
    return [mq.topic, mq.broker_name, mq.queue_id]


def mq_of(row: list[Any]) -> MessageQueue:
    """A queue from a msgpack row (extra fields ignored)."""
    return MessageQueue(row[0], row[1], int(row[2]))


def mq_rows(mqs: Iterable[MessageQueue]) -> list[list[Any]]:
    """Queues as msgpack rows, in Java's order."""
    return [mq_row(mq) for mq in sorted(mqs)]


@dataclass(frozen=True, slots=True)
class PullCommand:
    """One PULL_MESSAGE for the pull actor to send (PullAPIWrapper.pullKernelImpl's request)
    and where its answer goes (rid)."""

    rid: int
    addr: str
    group: str
    topic: str
    queue_id: int
    offset: int
    max_nums: int
    sys_flag: int
    commit_offset: int
    suspend_ms: int
    subscription: str | None
    sub_version: int
    expression_type: str | None
    timeout_ms: int

    def to_row(self) -> tuple[Any, ...]:
        """The command as a msgpack row (from_row's inverse)."""
        return (self.rid, self.addr, self.group, self.topic, self.queue_id, self.offset,
                self.max_nums, self.sys_flag, self.commit_offset, self.suspend_ms,
                self.subscription, self.sub_version, self.expression_type, self.timeout_ms)

    @classmethod
    def from_row(cls, row: list[Any]) -> PullCommand:
        """A command from its row (ValueError when the row is not one)."""
        if len(row) != _PULL_FIELDS:
            raise ValueError(f"a PULL row has {_PULL_FIELDS} fields, not {len(row)}")
        return cls(*row)

    def header(self) -> PullMessageRequestHeader:
        """The request header the pull actor writes."""
        return PullMessageRequestHeader(
            consumer_group=self.group, topic=self.topic, queue_id=self.queue_id,
            queue_offset=self.offset, max_msg_nums=self.max_nums, sys_flag=self.sys_flag,
            commit_offset=self.commit_offset, suspend_timeout_millis=self.suspend_ms,
            sub_version=self.sub_version, subscription=self.subscription,
            expression_type=self.expression_type)  # fmt: skip


_PULL_FIELDS: Final = len(PullCommand.__dataclass_fields__)


class PullAnswer(NamedTuple):
    """A PULL_RESULT's head."""

    rid: int
    status: int  # PullStatus value, BROKER_ERROR, NO_ANSWER
    next_begin: int  # the response code for BROKER_ERROR
    min_offset: int
    max_offset: int
    suggest: int

    @classmethod
    def read(cls, payload: memoryview) -> tuple[PullAnswer, memoryview]:
        """The head of a PULL_RESULT payload and what follows it."""
        return cls._make(PULL_RESULT_HEAD.unpack_from(payload, 0)), payload[PULL_RESULT_HEAD.size:]


def pull_commands(payload: memoryview | bytes) -> list[PullCommand]:
    """The commands of a PULL record."""
    return [PullCommand.from_row(row) for row in unpack(payload)]


def pull_record(cmds: Iterable[PullCommand]) -> bytes:
    """A PULL record's payload."""
    return pack([c.to_row() for c in cmds])


def pull_result_head(rid: int, status: int, next_begin: int, min_offset: int, max_offset: int,
                     suggest: int) -> bytes:
    """The head of a PULL_RESULT payload (its pull body follows)."""
    return PULL_RESULT_HEAD.pack(rid, status, next_begin, min_offset, max_offset, suggest)
