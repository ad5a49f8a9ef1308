"""The requests a holding processor group has taken, kept where its death cannot take them.

Mirrors no single RocketMQ class: in RocketMQ 4.9.x the PullMessageProcessor's executor queue
and PullRequestHoldService's table live in the broker's one JVM, and when that process dies
its clients' connections die with it. Here the pull group is a process of its own, replaced
while the client connections stay open (the RemotingServer owns them), so every pull it had
taken (queued in its channel, half processed, or held for long polling) would wait out the
client's timeout: 30 s for a push consumer's suspended pull, every consumer at once. The
RemotingServer answers them instead, from what this ledger kept:

- RequestLedger (the RemotingServer's, one per Unix channel of a group that holds requests,
  ProcessorGroup.holds_requests): every REQUEST record written to the channel is numbered
  1, 2, ... in channel order and its frame kept, until the processor says it dealt with it.
- A shared page (a memfd created here and passed on the channel with a LEDGER record, as the
  lock table is) carries what the processor says (LedgerWriter writes it):
  - `handled`, at offset 0: how many of the channel's REQUEST records the processor has read
    and dealt with. Published only after a pass whose answers all left its process (written
    to the client, or flushed into the channel, whose bytes the RemotingServer still reads
    after the processor's death), so no answer is lost between the two.
  - one SLOT per held request, written when it is held and cleared once its answer left the
    process: connection, opaque, header serialization, and the queue offset it pulls from.
    The state byte is written after the fields and cleared first (x86-64 keeps stores in
    order; a process killed between two stores leaves the slot free or whole). `high`, at
    offset 8, is one past the highest slot ever used, written before that slot.
- When the channel dies, `orphans()` answers every kept request numbered above `handled` and
  every held slot. A pull gets PULL_RETRY_IMMEDIATELY with nextBeginOffset = the offset it
  asked for (min = max = that offset, suggestWhichBrokerId 0): a Java 4.9.8 push consumer maps
  it to NO_MATCHED_MSG and pulls again at once from the same offset (PullCallback's
  correctTagsOffset moves nothing: the offset is where the consumer already is), as our
  client does; any other request gets SYSTEM_BUSY. An answer the client already had (its
  opaque no longer pending) is dropped by the client, as NettyRemotingAbstract's
  processResponseCommand drops one; so a request answered twice (counted before its
  `handled` was published) costs nothing.

GroupGap: the RemotingServer sends these answers once the replacement processor's channel is
connected, so that the clients' next pulls reach it (a pull answered SYSTEM_BUSY for want of a
processor makes a Java consumer wait 3 s), or after ORPHAN_WAIT_S without one. Requests for
the group that arrive meanwhile are kept (up to MAX_PARKED) and written to the replacement's
channel, with the time they arrived (its fast failure still sheds what waited too long);
past ORPHAN_WAIT_S they are answered SYSTEM_BUSY, as every group's requests are while it has
no processor. Processor channels over TCP carry no descriptors: their groups keep no ledger,
and their requests wait out the client's timeout as before.
"""

from __future__ import annotations

import logging
import mmap
import os
import socket
import struct
from collections import deque
from typing import Any, Final

from actors.core import Request
from actors.runtime.channel import Channel, add_ledger
from protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)

ORPHAN_WAIT_S: Final = 3.0  # answers wait this long at most for the replacement's channel
MAX_PARKED: Final = 10_000  # requests kept for a replacement, per group
HEADER_SIZE: Final = 64
HANDLED: Final = struct.Struct("<q")
HIGH: Final = struct.Struct("<q")  # at offset 8: slots in use at most (the scan's end)
# state (1 = held) | serialize type | opaque | conn_id | queue offset; 32 bytes a slot
SLOT: Final = struct.Struct("<BBxxiqq8x")
SLOT_FIELDS: Final = struct.Struct("<Bxxiqq")  # from the slot's second byte: all but state
SLOTS: Final = 65_536  # held requests a channel's page records (2 MiB, touched as used)
PAGE_SIZE: Final = HEADER_SIZE + SLOTS * SLOT.size
TRIM_AT: Final = 64  # kept frames looked at against `handled` once this many are kept
PULL_MESSAGE: Final = int(RequestCode.PULL_MESSAGE)
PULL_AGAIN_REMARK: Final = (
    "[PROCESSOR_REPLACED]the processor that took this pull was replaced, pull again")
REPLACED_REMARK: Final = (
    "[PROCESSOR_REPLACED]the processor that took this request was replaced, try again")


def pull_again(opaque: int, serialize_type: int, offset: int) -> bytes:
    """The encoded PULL_RETRY_IMMEDIATELY that sends a pull back to `offset` at once."""
    text = str(offset)
    return RemotingCommand(
        int(ResponseCode.PULL_RETRY_IMMEDIATELY), opaque=opaque, flag=RPC_TYPE_RESPONSE,
        remark=PULL_AGAIN_REMARK, ext_fields={"suggestWhichBrokerId": "0",
                                            "nextBeginOffset": text, "minOffset": text,
                                            "maxOffset": text},
        serialize_type=serialize_type).encode()  # fmt: skip


def orphan_answer(frame: Any) -> bytes | None:
    """The answer to a request frame (no length prefix) its dead processor left, or None
    (a response, a oneway request, or bytes that do not decode: nothing to answer)."""
    try:
        cmd = RemotingCommand.decode(frame)
    except ProtocolError:
        return None
    if cmd.flag & (RPC_TYPE_RESPONSE | RPC_ONEWAY):
        return None
    if cmd.code == PULL_MESSAGE:
        try:
            offset = int((cmd.ext_fields or {})["queueOffset"])
        except (KeyError, ValueError):
            offset = None
        if offset is not None:
            return pull_again(cmd.opaque, cmd.serialize_type, offset)
    return cmd.make_response(int(ResponseCode.SYSTEM_BUSY), REPLACED_REMARK).encode()


def _map(fd: int) -> mmap.mmap:
    return mmap.mmap(fd, PAGE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)


class RequestLedger:
    """The RemotingServer's ledger of one processor channel (see the module docstring)."""

    __slots__ = ("fd", "kept", "page", "routed")

    def __init__(self) -> None:
        self.fd = os.memfd_create("actormq-request-ledger", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, PAGE_SIZE)
            self.page = _map(self.fd)
        except OSError:
            os.close(self.fd)
            raise
        self.routed = 0  # REQUEST records written to the channel
        self.kept: deque[tuple[int, int, bytes]] = deque()  # (number, conn_id, frame)

    def routed_one(self, conn_id: int, frame: Any) -> None:
        """A REQUEST record carrying `frame` was queued for the channel."""
        self.routed += 1
        kept = self.kept
        kept.append((self.routed, conn_id, bytes(frame)))
        if len(kept) >= TRIM_AT:
            self.trim()

    def handled(self) -> int:
        """What the processor last published."""
        return int(HANDLED.unpack_from(self.page, 0)[0])

    def trim(self) -> None:
        """Forget the frames the processor has dealt with."""
        done = self.handled()
        kept = self.kept
        while kept and kept[0][0] <= done:
            kept.popleft()

    def orphans(self) -> list[tuple[int, bytes]]:
        """(conn_id, encoded answer) for every request the dead processor left unanswered:
        those above `handled`, and the held ones; the ledger is closed after."""
        self.trim()
        out: list[tuple[int, bytes]] = []
        for _n, conn_id, frame in self.kept:
            answer = orphan_answer(frame)
            if answer is not None:
                out.append((conn_id, answer))
        page = self.page
        high = min(SLOTS, max(0, int(HIGH.unpack_from(page, 8)[0])))
        for off in range(HEADER_SIZE, HEADER_SIZE + high * SLOT.size, SLOT.size):
            if page[off] == 1:
                st, opaque, conn_id, offset = SLOT_FIELDS.unpack_from(page, off + 1)
                out.append((conn_id, pull_again(opaque, st, offset)))
        self.close()
        return out

    def close(self) -> None:
        """Unmap and close the page (idempotent)."""
        self.kept.clear()
        if self.fd >= 0:
            self.page.close()
            os.close(self.fd)
            self.fd = -1


class LedgerWriter:
    """The processor's side of one channel's ledger page."""

    __slots__ = ("free", "high", "page", "read", "released", "unrecorded")

    def __init__(self, fd: int) -> None:
        try:
            self.page = _map(fd)
        finally:
            os.close(fd)  # the mapping keeps the memory
        self.read = 0  # REQUEST records read from the channel
        self.free: list[int] = []  # slots used before and free again
        self.high = 0  # slots ever used (the next new one)
        self.released: list[int] = []  # slots whose answers wait for the next publish
        self.unrecorded = 0  # holds not recorded: every slot was taken

    def hold(self, conn_id: int, opaque: int, serialize_type: int, offset: int) -> int:
        """Record a held request; its slot, or -1 when every slot is taken (logged)."""
        if self.free:
            slot = self.free.pop()
        elif self.high < SLOTS:
            slot = self.high
            self.high += 1
            HIGH.pack_into(self.page, 8, self.high)
        else:
            self.unrecorded += 1
            if self.unrecorded == 1:  # once per channel
                log.warning("request ledger full (%d held): held requests beyond are not "
                            "recorded", SLOTS)  # fmt: skip
            return -1
        off = HEADER_SIZE + slot * SLOT.size
        SLOT_FIELDS.pack_into(self.page, off + 1, serialize_type, opaque, conn_id, offset)
        self.page[off] = 1
        return slot

    def release_later(self, slot: int) -> None:
        """The held request was answered: its slot is cleared at the next publish, once
        the answer left this process."""
        self.released.append(slot)

    def publish(self) -> None:
        """Every answer so far left the process: clear the released slots, publish `read`."""
        if self.released:
            page, free = self.page, self.free
            for slot in self.released:
                page[HEADER_SIZE + slot * SLOT.size] = 0
                free.append(slot)
            self.released.clear()
        HANDLED.pack_into(self.page, 0, self.read)

    def close(self) -> None:
        """Unmap the page."""
        self.page.close()


class LedgerHolds:
    """actors.core.HoldObserver of the pull actor: each pull it hands to the hold service
    goes into the request ledger of the channel it came on, whose RemotingServer answers it
    if the pull actor dies."""

    __slots__ = ("conn_channel", "writers")

    def __init__(self, conn_channel: dict[int, Channel], writers: dict[Channel, LedgerWriter]
                 ) -> None:  # fmt: skip
        self.conn_channel = conn_channel
        self.writers = writers

    def held(self, req: Request, offset: int) -> object:
        """Record `req` in its channel's ledger; the token for released()."""
        ch = self.conn_channel.get(req.conn_id)
        writer = self.writers.get(ch) if ch is not None else None
        if writer is None:
            return None
        cmd = req.cmd
        slot = writer.hold(req.conn_id, cmd.opaque, cmd.serialize_type, offset)
        return (writer, slot) if slot >= 0 else None

    def released(self, token: object) -> None:
        """The request is answered: its slot is cleared once the answer left the process."""
        if isinstance(token, tuple):
            writer, slot = token
            writer.release_later(slot)


class GroupGap:
    """A holding group between its processor's death and its replacement's channel: the
    answers the dead one owed, and the requests that came meanwhile."""

    __slots__ = ("answers", "deadline", "parked")

    def __init__(self, answers: list[tuple[int, bytes]], deadline: float) -> None:
        self.answers = answers  # (conn_id, encoded answer)
        self.deadline = deadline  # time.monotonic() past which nobody waits any more
        self.parked: list[tuple[int, int, int, int, bytes]] = []  # REQUEST record fields

    def park(self, conn_id: int, recv_ns: int, peer_ip: int, peer_port: int, frame: Any) -> bool:
        """Keep a request for the replacement; False when MAX_PARKED are kept already."""
        if len(self.parked) >= MAX_PARKED:
            return False
        self.parked.append((conn_id, recv_ns, peer_ip, peer_port, bytes(frame)))
        return True


class ChannelLedgers:
    """The RemotingServer's ledgers, one per Unix channel of a holding group, and the gaps of
    the groups whose processor died, one per group (the RemotingServer does the sending)."""

    __slots__ = ("by_channel", "gaps", "groups")

    def __init__(self, groups: frozenset[str] = frozenset()) -> None:
        self.groups = groups  # StartRemoting.ledger_groups
        self.by_channel: dict[Channel, RequestLedger] = {}
        self.gaps: dict[str, GroupGap] = {}

    def attach(self, group: str, ch: Channel) -> None:
        """A new channel of `group`: its ledger page goes first on it (holding groups on Unix
        channels only)."""
        if group not in self.groups or ch.sock.family != socket.AF_UNIX:
            return
        ledger = RequestLedger()
        records = bytearray()
        add_ledger(records)
        if ch.send_with_fds(bytes(records), [ledger.fd]):
            self.by_channel[ch] = ledger
        else:
            ledger.close()
            log.warning("group=%s: its request ledger could not be sent", group)

    def gone(self, ch: Channel, now: float) -> bool:
        """Channel `ch` closed: what its processor owed waits in its group's gap. True when
        that gap is new (its deadline, now + ORPHAN_WAIT_S, wants a timer)."""
        ledger = self.by_channel.pop(ch, None)
        if ledger is None:
            return False
        answers = ledger.orphans()
        log.warning("processor group=%s is gone: %d request(s) it had taken are answered once "
                    "it is replaced (at most %.0f s from now)", ch.name, len(answers),
                    ORPHAN_WAIT_S)  # fmt: skip
        gap = self.gaps.get(ch.name)
        if gap is not None:
            gap.answers.extend(answers)
            return False
        self.gaps[ch.name] = GroupGap(answers, now + ORPHAN_WAIT_S)
        return True

    def park(self, group: str, conn_id: int, recv_ns: int, peer_ip: int, peer_port: int,
             frame: Any) -> bool:  # fmt: skip
        """Keep a request for the group's replacement; False: the group has no gap open (or
        it is full)."""
        gap = self.gaps.get(group)
        return gap is not None and gap.park(conn_id, recv_ns, peer_ip, peer_port, frame)

    def late(self, now: float) -> list[tuple[str, GroupGap]]:
        """The gaps past their deadline, taken out."""
        return [(g, self.gaps.pop(g)) for g in [g for g, gap in self.gaps.items()
                                                 if gap.deadline <= now]]  # fmt: skip

    def close(self) -> None:
        """The RemotingServer stops: nobody is owed an answer any more."""
        for ledger in self.by_channel.values():
            ledger.close()
        self.by_channel.clear()
        self.gaps.clear()
