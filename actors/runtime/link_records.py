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

Each record is a frozen dataclass; on the wire it is a msgpack array [kind, *fields] in field
order (`encode` / `decode`); a record that does not decode ends the link (ChannelError).
Requests between actors that are RemotingCommands (a service's re-put to the store writer)
travel as REQUEST / REPLY records on the same link, not as LINK records.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final

import msgpack

from actors.runtime.channel import ChannelError


@dataclass(frozen=True, slots=True)
class LinkHello:
    """First record of a link: who opened it (a processor group, or "HAService")."""

    role: str


@dataclass(frozen=True, slots=True)
class ArrivalNotices:
    """Store writer -> hold service: messages reached these queues (NotifyMessageArriving
    Listener), one (topic, queue id, max offset, tags code, store time) per queue and tags
    code of a batch; none at all asks for a re-check of every held pull against the store."""

    notices: tuple[tuple[str, int, int, int | None, int], ...]


@dataclass(frozen=True, slots=True)
class HoldsChanged:
    """Hold service -> store writer: whether it holds pulls now (sent on change; the writer
    sends no notices while none are held)."""

    holding: bool


@dataclass(frozen=True, slots=True)
class HoldPull:
    """Pull actor -> hold service: park this pull (suspendPullRequest). The filter is the
    subscription's as the pull processor resolved it: the tag hash codes (None: every tag), or
    a SQL92 expression. The request itself stays with the pull actor (it answers it)."""

    token: int  # the pull actor's number for it (WakePull carries it back)
    conn_id: int
    topic: str
    queue_id: int
    offset: int  # the queue offset it pulls from
    suspend_ms: int
    timeout_ms: int
    tag_codes: tuple[int, ...] | None
    sql: str | None


@dataclass(frozen=True, slots=True)
class WakePull:
    """Hold service -> pull actor: run this held pull again, without suspending it
    (executeRequestWhenWakeup): messages arrived, or its hold time is over."""

    token: int


@dataclass(frozen=True, slots=True)
class ConnGone:
    """Pull actor -> hold service: the connection closed; its held pulls go nowhere."""

    conn_id: int


@dataclass(frozen=True, slots=True)
class TransferWait:
    """Send actor -> GroupTransferService: answer `frame` (an encoded SEND response) to the
    connection once a slave reported `end_offset`, or FLUSH_SLAVE_TIMEOUT at `deadline_ms`
    (keep_code: a reply message's answer, whose code is the push's whatever the wait)."""

    token: int
    conn_id: int
    end_offset: int
    deadline_ms: int
    keep_code: bool
    frame: bytes


@dataclass(frozen=True, slots=True)
class TransferDone:
    """GroupTransferService -> send actor: these waits are answered (their answers left)."""

    tokens: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SlaveAcked:
    """HAService -> GroupTransferService: push2SlaveMaxOffset grew (and the slave count)."""

    offset: int
    slaves: int


LinkRecord = (LinkHello | ArrivalNotices | HoldsChanged | HoldPull | WakePull | ConnGone
              | TransferWait | TransferDone | SlaveAcked)  # fmt: skip

_KINDS: Final[tuple[type[Any], ...]] = (
    LinkHello, ArrivalNotices, HoldsChanged, HoldPull, WakePull, ConnGone, TransferWait,
    TransferDone, SlaveAcked)  # fmt: skip
_KIND_OF: Final = {cls: i for i, cls in enumerate(_KINDS)}
_NAMES: Final = {cls: tuple(f.name for f in fields(cls)) for cls in _KINDS}
_ARITY: Final = {cls: len(names) for cls, names in _NAMES.items()}
_TUPLE_FIELDS: Final = {HoldPull: (7,), TransferDone: (0,)}  # msgpack gives lists back
_NESTED_TUPLES: Final = {ArrivalNotices: 0}


def encode(rec: LinkRecord) -> bytes:
    """The LINK record payload of `rec`."""
    cls = type(rec)
    return msgpack.packb([_KIND_OF[cls], *(getattr(rec, n) for n in _NAMES[cls])],
                         use_bin_type=True)


def decode(payload: Any) -> LinkRecord:
    """The record of a LINK payload; ChannelError when it is not one."""
    try:
        items = msgpack.unpackb(payload, use_list=True, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ChannelError(f"undecodable link record: {exc!r}") from None
    if not isinstance(items, list) or not items or not isinstance(items[0], int):
        raise ChannelError("a link record is not [kind, fields...]")
    kind = items[0]
    if not 0 <= kind < len(_KINDS):
        raise ChannelError(f"unknown link record kind {kind}")
    cls = _KINDS[kind]
    values = items[1:]
    if len(values) != _ARITY[cls]:
        raise ChannelError(f"{cls.__name__}: {len(values)} fields, not {_ARITY[cls]}")
    for i in _TUPLE_FIELDS.get(cls, ()):
        if isinstance(values[i], list):
            values[i] = tuple(values[i])
    nested = _NESTED_TUPLES.get(cls)
    if nested is not None:
        values[nested] = tuple(map(tuple, values[nested]))
    rec: LinkRecord = cls(*values)
    return rec
