"""The consumer side's records on the client channel (kinds 64-95; client_channel.py frames).

Mirrors nothing in RocketMQ (a Java consumer is one process): these records carry what a Java
client passes between its own threads — PullRequests to PullMessageService and PullResults
back, RebalanceImpl's queue changes, the relayed broker requests for the group — between the
consumer services (actors) and the consumer core in the user's process. Every record is
msgpack except PULL_RESULT, whose pull body travels raw behind a fixed header:

    PULL_RESULT 65   pull actor -> user
      offset size field
      0      4    request id
      4      1    status: 0 FOUND, 1 NO_NEW_MSG, 2 NO_MATCHED_MSG, 3 OFFSET_ILLEGAL,
                  254 the broker answered an error (code in next_begin_offset, remark below),
                  255 no answer (timeout, connection; the reason below)
      5      8    next_begin_offset
      13     8    min_offset
      21     8    max_offset
      29     8    suggest_which_broker_id
      37     ...  the pull body (FOUND), else the remark / reason in UTF-8

    PULL 64          user -> pull actor    [[rid, addr, group, topic, qid, offset, max_nums,
                                            sys_flag, commit_offset, suspend_ms, subscription,
                                            sub_version, expression_type, timeout_ms], ...]
    ASSIGN 70        rebalance -> user     [group, [[topic, broker, qid, locked, lock_ms], ...]]
    REVOKE 71        rebalance -> user     [group, [[topic, broker, qid], ...]]
    LOCK_STATE 72    rebalance -> user     [group, [[topic, broker, qid, locked, lock_ms], ...]]
    REVOKED 73       user -> rebalance     [group, [[topic, broker, qid], ...]]
    RELAY 74         rebalance -> user     [group, request id, broker addr, request frame]
    RELAY_ANSWER 75  user -> rebalance     [request id, response frame | None]
    PERSIST 76       rebalance -> user     [group]
    REBALANCE_NOW 77 user -> rebalance     [group]
    QUEUES 78        rebalance -> user     [group, topic, [mq_all...], [mq_divided...]]
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, Final

from actors.client.client_channel import pack, unpack
from protocol.bodies import MessageQueue

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


def encode_pull_result(rid: int, status: int, next_begin: int, min_offset: int, max_offset: int,
                       suggest: int, tail: bytes | memoryview) -> bytes:
    """A PULL_RESULT payload."""
    return PULL_RESULT_HEAD.pack(rid, status, next_begin, min_offset, max_offset, suggest) + \
        bytes(tail)
