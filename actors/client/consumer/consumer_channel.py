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
      5      1    1: the pull actor already sent the queue's next pull under the same request
                  id (pull_flow_control.py), 0: the request is over
      6      8    next_begin_offset
      14     8    min_offset
      22     8    max_offset
      30     8    suggest_which_broker_id
      38     ...  the pull body (FOUND), else the remark / reason in UTF-8

    PULL 64          user -> pull actor    [[rid, addr, group, topic, qid, offset, max_nums,
                                            sys_flag, commit_offset, suspend_ms, subscription,
                                            sub_version, expression_type, timeout_ms,
                                            chain], ...]  chain: None, or the pull actor may
                                            re-pull: [broker_id, seq, cached count, cached body
                                            bytes, first cached offset, commit offset,
                                            queue count, queue MiB, max span, budget count,
                                            budget MiB]
    PROGRESS 66      user -> pull actor    [[rid, seq, count, bytes, first offset, commit], ...]
    STOP 67          user -> pull actor    [token, [rid, ...]]: end those chains
    STOPPED 68       pull actor -> user    [token]: every pull of those chains was written
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
PROGRESS: Final = 66
STOP: Final = 67
STOPPED: Final = 68
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
    "B"  # 1: re-pulled by the pull actor under the same request id
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


def pull_result_head(rid: int, status: int, next_begin: int, min_offset: int, max_offset: int,
                     suggest: int, repulled: bool = False) -> bytes:
    """The head of a PULL_RESULT payload (its pull body follows)."""
    return PULL_RESULT_HEAD.pack(rid, status, int(repulled), next_begin, min_offset,
                                 max_offset, suggest)
