"""Typed records between a broker's service actors and the processors they serve.

Mirrors the calls RocketMQ 4.9.x makes between threads of one JVM where those threads are
actors of their own here: the store's dispatch -> NotifyMessageArrivingListener
(`ArrivalNotices`, gated by `HoldsChanged`), PullMessageProcessor.processRequest ->
PullRequestHoldService
.suspendPullRequest (`HoldPull`), PullRequestHoldService -> PullMessageProcessor
.executeRequestWhenWakeup (`WakePull`), CommitLog.handleHA -> GroupTransferService
.putRequest (`TransferWait`) and HAService.notifyTransferSome (`SlaveAcked`). They travel as
LINK records (actors.runtime.channel) on a link: a channel one actor opens to another's
listener when the controller says so (ConnectLink), whose first record is `LinkHello`.

Each record is a typed record (actors.runtime.typed_record, the same mechanism as the client
channel's): a frozen dataclass registered in LINK_RECORDS under its KIND. A LINK record's
payload is that kind byte and the fields as one msgpack array in field order (`encode` /
`decode`); a record that does not decode ends the link (ChannelError).
Requests between actors that are RemotingCommands (a service's re-put to the store writer)
travel as REQUEST / REPLY records on the same link, not as LINK records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from actors.runtime.typed_record import ChannelError, RecordKinds, TypedRecord

LINK_RECORDS: Final = RecordKinds("link")


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class LinkHello(TypedRecord):
    """First record of a link: who opened it (a processor group, or "HAService")."""

    KIND: ClassVar[int] = 1

    role: str


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class ArrivalNotices(TypedRecord):
    """Store writer -> hold service: messages reached these queues (NotifyMessageArriving
    Listener), one (topic, queue id, max offset, tags code, store time) per queue and tags
    code of a batch; none at all asks for a re-check of every held pull against the store."""

    KIND: ClassVar[int] = 2

    notices: tuple[tuple[str, int, int, int | None, int], ...]

    @classmethod
    def from_row(cls, row: list[Any]) -> ArrivalNotices:
        return cls(tuple(map(tuple, row[0])))


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class HoldsChanged(TypedRecord):
    """Hold service -> store writer: whether it holds pulls now (sent on change; the writer
    sends no notices while none are held)."""

    KIND: ClassVar[int] = 3

    holding: bool


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class HoldPull(TypedRecord):
    """Pull actor -> hold service: park this pull (suspendPullRequest). The filter is the
    subscription's as the pull processor resolved it: the tag hash codes (None: every tag), or
    a SQL92 expression. The request itself stays with the pull actor (it answers it)."""

    KIND: ClassVar[int] = 4

    token: int  # the pull actor's number for it (WakePull carries it back)
    conn_id: int
    topic: str
    queue_id: int
    offset: int  # the queue offset it pulls from
    suspend_ms: int
    timeout_ms: int
    tag_codes: tuple[int, ...] | None
    sql: str | None

    @classmethod
    def from_row(cls, row: list[Any]) -> HoldPull:
        token, conn_id, topic, queue_id, offset, suspend_ms, timeout_ms, codes, sql = row
        return cls(token, conn_id, topic, queue_id, offset, suspend_ms, timeout_ms,
                   tuple(codes) if codes is not None else None, sql)


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class WakePull(TypedRecord):
    """Hold service -> pull actor: run this held pull again, without suspending it
    (executeRequestWhenWakeup): messages arrived, or its hold time is over."""

    KIND: ClassVar[int] = 5

    token: int


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class ConnGone(TypedRecord):
    """Pull actor -> hold service: the connection closed; its held pulls go nowhere."""

    KIND: ClassVar[int] = 6

    conn_id: int


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class TransferWait(TypedRecord):
    """Send actor -> GroupTransferService: answer `frame` (an encoded SEND response) to the
    connection once a slave reported `end_offset`, or FLUSH_SLAVE_TIMEOUT at `deadline_ms`
    (keep_code: a reply message's answer, whose code is the push's whatever the wait)."""

    KIND: ClassVar[int] = 7

    token: int
    conn_id: int
    end_offset: int
    deadline_ms: int
    keep_code: bool
    frame: bytes


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class TransferDone(TypedRecord):
    """GroupTransferService -> send actor: these waits are answered (their answers left)."""

    KIND: ClassVar[int] = 8

    tokens: tuple[int, ...]

    @classmethod
    def from_row(cls, row: list[Any]) -> TransferDone:
        return cls(tuple(row[0]))


@LINK_RECORDS.register
@dataclass(frozen=True, slots=True)
class SlaveAcked(TypedRecord):
    """HAService -> GroupTransferService: push2SlaveMaxOffset grew (and the slave count)."""

    KIND: ClassVar[int] = 9

    offset: int
    slaves: int


LinkRecord = (LinkHello | ArrivalNotices | HoldsChanged | HoldPull | WakePull | ConnGone
              | TransferWait | TransferDone | SlaveAcked)  # fmt: skip


def encode(rec: LinkRecord) -> bytes:
    """The LINK record payload of `rec`: its kind byte, then its fields."""
    return bytes((rec.KIND,)) + rec.encode()


def decode(payload: Any) -> LinkRecord:
    """The record of a LINK payload; ChannelError when it is not one."""
    if len(payload) < 1:
        raise ChannelError("an empty link record")
    rec = LINK_RECORDS.read(payload[0], payload[1:])
    if not isinstance(rec, LinkRecord):  # every type LINK_RECORDS holds is one
        raise ChannelError(f"{type(rec).__name__} is not a link record")
    return rec
