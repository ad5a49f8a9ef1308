"""The consumer side's records on the client channel (kinds 64-95; client_channel.py frames).

Mirrors nothing in RocketMQ (a Java consumer is one process): these records carry what a Java
client passes between its own threads (PullRequests to PullMessageService and PullResults
back, RebalanceImpl's queue changes, the relayed broker requests for the group) between the
consumer services (actors) and the consumer core in the user's process. The consumer core owns
the ProcessQueues, the pull requests and the flow-control gates; the pull actor keeps nothing
between a PullCommand and its answer. Every record is msgpack except PULL_RESULT, whose pull
body travels raw behind a fixed header:

    Pull 64             user -> pull actor    the PullCommands to send, in order (TLS)
    PULL_RESULT 65      pull actor -> user    PULL_RESULT_HEAD (PullAnswer), then the pull body
                                              (FOUND) or the remark / reason in UTF-8 (no
                                              msgpack: the body is forwarded untouched):
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
    RingShared 66       pull actor -> user    ring id, size; the ring's memfd rides with the
                                              record (SCM_RIGHTS)
    PULL_AT 67          pull actor -> user    PULL_RESULT_HEAD (status FOUND), then RING_REF:
                                              the pull body lies in a shared ring (frame_ring)
      37     4    ring id
      41     8    token (what RingRelease gives back)
      49     8    offset of the pull body in the ring
      57     8    its length
    RingRelease 68      user -> pull actor    (ring id, token) of each PULL_AT read
    RingRetired 69      pull actor -> user    ring id: closed, unmap it
    RingRefused 79      user -> pull actor    ring id: could not be mapped (copy its answers)
    ConnWanted 81       user -> pull actor    broker addr: connect to it and hand the
                                              connection over (not over TLS)
    ConnShared 80       pull actor -> user    connection id, broker addr; the connection's
                                              socket rides with the record (SCM_RIGHTS): the
                                              user's process writes its pulls and reads their
                                              answers itself (shared_pull_connection); the
                                              pull actor keeps no copy
    ConnFailed 82       pull actor -> user    broker addr, reason: no connection was made
    Assign 70           rebalance -> user     group, the queues taken (QueueLock each)
    Revoke 71           rebalance -> user     group, the queues to let go
    LockStates 72       rebalance -> user     group, the orderly queues' broker locks
    Revoked 73          user -> rebalance     group, the queues let go (drained, committed)
    Relay 74            rebalance -> user     group, request id, broker addr, request frame
    RelayAnswer 75      user -> rebalance     request id, response frame | None
    PersistGroup 76     rebalance -> user     group (persistConsumerOffset's tick)
    RebalanceNow 77     user -> rebalance     group
    QueuesChanged 78    rebalance -> user     group, topic, every queue, this consumer's share

A PullCommand for a broker reaches it after every PullCommand sent before it for that broker
(how a consumer's last commit lands after the pulls before it: PullCallback): each broker's
pulls are written on its one connection in order, by the user's process (plain TCP: those
queued for a connection still being made go first) or by the pull actor in a PULL record's
order (TLS).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar, Final, NamedTuple, TypeVar

from actors.client import client_channel as ch
from actors.client.client_requests import PullFrames, pull_frames
from actors.client.errors import MQBrokerError, MQClientError
from actors.client.frame_ring import RingRef
from actors.client.records import PullResult
from actors.runtime.typed_record import TypedRecord
from protocol.acl import SessionCredentials
from protocol.bodies import MessageQueue
from protocol.headers import PullMessageRequestHeader

PULL: Final = 64
PULL_RESULT: Final = 65
RING_SHARED: Final = 66
PULL_AT: Final = 67
RING_RELEASE: Final = 68
RING_RETIRED: Final = 69
ASSIGN: Final = 70
REVOKE: Final = 71
LOCK_STATE: Final = 72
REVOKED: Final = 73
RELAY: Final = 74
RELAY_ANSWER: Final = 75
PERSIST: Final = 76
REBALANCE_NOW: Final = 77
QUEUES: Final = 78
RING_REFUSED: Final = 79
CONN_SHARED: Final = 80
CONN_WANTED: Final = 81
CONN_FAILED: Final = 82

BROKER_ERROR: Final = 254
NO_ANSWER: Final = 255
# A pull body as the PullCallback gets it: bytes or a bytearray is handed over (read for that
# answer alone: the decoder's records may refer to it); a memoryview is valid only until the
# callback returns (a pull ring's slot).
PullBody = bytes | bytearray | memoryview

PULL_RESULT_HEAD = struct.Struct(
    ">I"  # request id
    "B"  # status (PullStatus value, 254 broker error, 255 no answer)
    "q"  # next_begin_offset (the response code when status is 254)
    "q"  # min_offset
    "q"  # max_offset
    "q"  # suggest_which_broker_id
)


RING_REF = struct.Struct(">IQQQ")  # ring id, token, offset, length (PULL_AT, after the head)


class PullCommand(NamedTuple):
    """One PULL_MESSAGE to send (PullAPIWrapper.pullKernelImpl's request) and where its
    answer goes (rid). A NamedTuple: one is built for every pull, and over TLS again on the
    pull actor's side of the channel (0.3 us; a frozen dataclass took 1.5)."""

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
        return tuple(self)

    @classmethod
    def from_row(cls, row: list[Any]) -> PullCommand:
        """A command from its row (ValueError when the row is not one)."""
        if len(row) != _PULL_FIELDS:
            raise ValueError(f"a PULL row has {_PULL_FIELDS} fields, not {len(row)}")
        return cls._make(row)

    def header(self) -> PullMessageRequestHeader:
        """The request header the pull actor writes."""
        return PullMessageRequestHeader(
            consumer_group=self.group, topic=self.topic, queue_id=self.queue_id,
            queue_offset=self.offset, max_msg_nums=self.max_nums, sys_flag=self.sys_flag,
            commit_offset=self.commit_offset, suspend_timeout_millis=self.suspend_ms,
            sub_version=self.sub_version, subscription=self.subscription,
            expression_type=self.expression_type)  # fmt: skip


_PULL_FIELDS: Final = len(PullCommand._fields)


class PullCommandFrames:
    """The PULL_MESSAGE frame of each PullCommand, from its queue's PullFrames (a template
    where it can be one: client_requests.pull_frames), kept per queue and subscription. The
    user's process writes the plain TCP pulls with one, the pull actor the TLS ones with
    another."""

    __slots__ = ("credentials", "serialize_type", "templates")
    LIMIT: Final = 4096  # queues x subscriptions kept

    def __init__(self, credentials: SessionCredentials | None, serialize_type: int) -> None:
        self.credentials = credentials
        self.serialize_type = serialize_type
        self.templates: dict[tuple[Any, ...], PullFrames] = {}

    def frame(self, cmd: PullCommand, opaque: int) -> bytes:
        """cmd's whole request frame, under this opaque."""
        key = (cmd.group, cmd.topic, cmd.queue_id, cmd.suspend_ms, cmd.subscription,
               cmd.sub_version, cmd.expression_type)  # fmt: skip
        frames = self.templates.get(key)
        if frames is None:
            if len(self.templates) >= self.LIMIT:
                self.templates.clear()
            frames = self.templates[key] = pull_frames(cmd.header(), self.credentials,
                                                       self.serialize_type)  # fmt: skip
        return frames.frame(cmd.offset, cmd.max_nums, opaque, cmd.commit_offset, cmd.sys_flag)


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


def read_pull_at(payload: memoryview) -> tuple[PullAnswer, RingRef]:
    """A PULL_AT payload: the answer's head and where its pull body lies."""
    answer = PullAnswer._make(PULL_RESULT_HEAD.unpack_from(payload, 0))
    if len(payload) != PULL_RESULT_HEAD.size + RING_REF.size:
        raise ch.ChannelError(f"a PULL_AT of {len(payload)} bytes")
    return answer, RingRef(*RING_REF.unpack_from(payload, PULL_RESULT_HEAD.size))


def pull_at_ref(ref: RingRef) -> bytes:
    """The RING_REF part of a PULL_AT payload."""
    return RING_REF.pack(ref.ring_id, ref.token, ref.offset, ref.length)


def pull_answer(rid: int, result: PullResult | None, err: MQClientError | None
                ) -> tuple[PullAnswer, bytes | memoryview]:  # fmt: skip
    """A pull's outcome as the PullCallback reads it: the head, and the pull body (FOUND),
    the broker's remark (BROKER_ERROR, its code in next_begin) or why there is no answer."""
    if result is not None:
        return PullAnswer(rid, result.status.value, result.next_begin_offset, result.min_offset,
                          result.max_offset, result.suggest_which_broker_id), result.body
    if isinstance(err, MQBrokerError):
        return PullAnswer(rid, BROKER_ERROR, err.code, 0, 0, 0), (err.remark or "").encode()
    return PullAnswer(rid, NO_ANSWER, 0, 0, 0, 0), str(err or "no answer").encode()


def pull_result_head(rid: int, status: int, next_begin: int, min_offset: int, max_offset: int,
                     suggest: int) -> bytes:
    """The head of a PULL_RESULT payload (its pull body follows)."""
    return PULL_RESULT_HEAD.pack(rid, status, next_begin, min_offset, max_offset, suggest)


@ch.record
@dataclass(frozen=True, slots=True)
class RingShared(TypedRecord):
    """A pull ring the user's process maps (its memfd rides with this record)."""

    KIND: ClassVar[int] = RING_SHARED
    ring_id: int
    size: int


@ch.record
@dataclass(frozen=True, slots=True)
class RingRetired(TypedRecord):
    """A ring the pull actor closed (after every PULL_AT in it): unmap it."""

    KIND: ClassVar[int] = RING_RETIRED
    ring_id: int


@ch.record
@dataclass(frozen=True, slots=True)
class RingRefused(TypedRecord):
    """A ring the user's process could not map: its answers must come by copy."""

    KIND: ClassVar[int] = RING_REFUSED
    ring_id: int


@ch.record
@dataclass(frozen=True, slots=True)
class ConnShared(TypedRecord):
    """A broker connection the pull actor made for the user's process, which writes the pulls
    on it and reads their answers (its socket rides with this record)."""

    KIND: ClassVar[int] = CONN_SHARED
    conn_id: int
    addr: str


@ch.record
@dataclass(frozen=True, slots=True)
class ConnWanted(TypedRecord):
    """The user's process has pulls for a broker it has no connection to."""

    KIND: ClassVar[int] = CONN_WANTED
    addr: str


@ch.record
@dataclass(frozen=True, slots=True)
class ConnFailed(TypedRecord):
    """No connection to the broker a ConnWanted asked for could be made."""

    KIND: ClassVar[int] = CONN_FAILED
    addr: str
    reason: str


@ch.record
@dataclass(frozen=True, slots=True)
class RingRelease(TypedRecord):
    """The PULL_AT answers read: (ring id, token) each, their ring space free again."""

    KIND: ClassVar[int] = RING_RELEASE
    tokens: tuple[tuple[int, int], ...]

    def row(self) -> list[Any]:
        return [[list(t) for t in self.tokens]]

    @classmethod
    def from_row(cls, row: list[Any]) -> RingRelease:
        return cls(tuple((int(r), int(t)) for r, t in row[0]))


def _mq_row(mq: MessageQueue) -> list[Any]:
    return [mq.topic, mq.broker_name, mq.queue_id]


def _mq(row: list[Any]) -> MessageQueue:
    topic, broker, qid = row
    return MessageQueue(str(topic), str(broker), int(qid))


def _mqs(rows: list[Any]) -> tuple[MessageQueue, ...]:
    return tuple(_mq(r) for r in rows)


@dataclass(frozen=True, slots=True)
class QueueLock:
    """A queue and the broker lock this consumer holds on it (orderly; False otherwise)."""

    mq: MessageQueue
    locked: bool = False
    lock_ms: int = 0

    def to_row(self) -> list[Any]:
        return [*_mq_row(self.mq), self.locked, self.lock_ms]

    @classmethod
    def from_row(cls, row: list[Any]) -> QueueLock:
        topic, broker, qid, locked, lock_ms = row
        return cls(MessageQueue(str(topic), str(broker), int(qid)), bool(locked), int(lock_ms))


@ch.record
@dataclass(frozen=True, slots=True)
class Pull(TypedRecord):
    """PullCommands for the pull actor, written to their brokers in this order."""

    KIND: ClassVar[int] = PULL
    commands: tuple[PullCommand, ...]

    def row(self) -> list[Any]:
        return [[c.to_row() for c in self.commands]]

    @classmethod
    def from_row(cls, row: list[Any]) -> Pull:
        return cls(tuple(PullCommand.from_row(r) for r in row[0]))


class GroupRecord(TypedRecord):
    """A rebalance record: for one consumer group's core."""

    __slots__ = ()
    group: str


class QueueLocksRecord(GroupRecord):
    """A group record carrying queues with their lock state."""

    __slots__ = ()
    queues: tuple[QueueLock, ...]

    def row(self) -> list[Any]:
        return [self.group, [q.to_row() for q in self.queues]]

    @classmethod
    def from_row(cls: type[_Q], row: list[Any]) -> _Q:
        return cls(str(row[0]), tuple(QueueLock.from_row(r) for r in row[1]))  # type: ignore[call-arg]


class QueuesRecord(GroupRecord):
    """A group record carrying queues."""

    __slots__ = ()
    mqs: tuple[MessageQueue, ...]

    def row(self) -> list[Any]:
        return [self.group, [_mq_row(mq) for mq in self.mqs]]

    @classmethod
    def from_row(cls: type[_M], row: list[Any]) -> _M:
        return cls(str(row[0]), _mqs(row[1]))  # type: ignore[call-arg]


_Q = TypeVar("_Q", bound=QueueLocksRecord)
_M = TypeVar("_M", bound=QueuesRecord)


@ch.record
@dataclass(frozen=True, slots=True)
class Assign(QueueLocksRecord):
    """RebalanceImpl took these queues for the group."""

    KIND: ClassVar[int] = ASSIGN
    group: str
    queues: tuple[QueueLock, ...]


@ch.record
@dataclass(frozen=True, slots=True)
class LockStates(QueueLocksRecord):
    """The broker locks of the group's orderly queues changed."""

    KIND: ClassVar[int] = LOCK_STATE
    group: str
    queues: tuple[QueueLock, ...]


@ch.record
@dataclass(frozen=True, slots=True)
class Revoke(QueuesRecord):
    """Let these queues go (drain, commit, then Revoked)."""

    KIND: ClassVar[int] = REVOKE
    group: str
    mqs: tuple[MessageQueue, ...]


@ch.record
@dataclass(frozen=True, slots=True)
class Revoked(QueuesRecord):
    """The group's core let these queues go (or could not take them)."""

    KIND: ClassVar[int] = REVOKED
    group: str
    mqs: tuple[MessageQueue, ...]


@ch.record
@dataclass(frozen=True, slots=True)
class Relay(GroupRecord):
    """A broker request for the group (GET_CONSUMER_RUNNING_INFO, RESET offsets, ...)."""

    KIND: ClassVar[int] = RELAY
    group: str
    request_id: int
    broker_addr: str
    frame: bytes


@ch.record
@dataclass(frozen=True, slots=True)
class RelayAnswer(TypedRecord):
    """The answer to a Relay (None: none is owed)."""

    KIND: ClassVar[int] = RELAY_ANSWER
    request_id: int
    frame: bytes | None


@ch.record
@dataclass(frozen=True, slots=True)
class PersistGroup(GroupRecord):
    """persistConsumerOffset's tick for the group."""

    KIND: ClassVar[int] = PERSIST
    group: str


@ch.record
@dataclass(frozen=True, slots=True)
class RebalanceNow(GroupRecord):
    """Run a rebalance round of the group now."""

    KIND: ClassVar[int] = REBALANCE_NOW
    group: str


@ch.record
@dataclass(frozen=True, slots=True)
class QueuesChanged(GroupRecord):
    """messageQueueChanged: a topic's queues or this consumer's share of them changed."""

    KIND: ClassVar[int] = QUEUES
    group: str
    topic: str
    mq_all: tuple[MessageQueue, ...]
    mq_divided: tuple[MessageQueue, ...]

    def row(self) -> list[Any]:
        return [self.group, self.topic, [_mq_row(m) for m in sorted(self.mq_all)],
                [_mq_row(m) for m in sorted(self.mq_divided)]]

    @classmethod
    def from_row(cls, row: list[Any]) -> QueuesChanged:
        return cls(str(row[0]), str(row[1]), _mqs(row[2]), _mqs(row[3]))
