"""Pull answers shared, not copied, between the pull actor and the user's process.

Mirrors nothing in RocketMQ: a Java consumer is one process, so its PullCallback reads the pull
body straight from the Netty buffer the response arrived in. Here the pull actor
(PullMessageServiceActor) owns the broker connections and the consumer core in the user's
process owns the ProcessQueues, so a pull answer must cross between them. It crosses by
reference: the pull actor reads each frame from the socket straight into a shared memory ring
(a memfd, mapped by both processes; its descriptor crosses the client channel once), and the
PULL_AT record names where the pull body lies. The user's process decodes the messages from
there (each body is copied once, into its message) and gives the space back with a RingRelease
record. A body is thus copied twice from socket to handler: by the kernel into the ring, and
into the message's `body`.

Who owns what:
- the pull actor owns the rings' space (RingSpace: which bytes are reserved, which are free);
  a frame's space is reserved when its length is read and freed by the actor itself (an answer
  it does not forward, a frame cut short by its connection's close) or by the user's
  RingRelease (one it forwarded);
- the user's process only reads (the mapping is read-only there), acknowledges, and unmaps a
  ring when the actor says it is retired (RingRetired, written after every PULL_AT in it).

Each broker connection has a ring of its own, so a broker that stops mid-frame holds back only
its own answers. An answer larger than a quarter of a ring gets a ring of its own, used once.
When a connection's ring is full the connection is not read until a release frees space
(the broker's writes wait in TCP); only a ring the channel could not take is offered again on
a timer. Over TLS the session decrypts straight into the ring. A ring the user's process
cannot map is refused (RingRefused): its answers are then copied through the channel.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from protocol.errors import ProtocolError
from protocol.framing import frame_size

log = logging.getLogger(__name__)

RING_SIZE: Final = 4 * 1024 * 1024  # one per broker connection
READ_BUDGET: Final = 8 * 1024 * 1024  # bytes read from one connection in one pass at most
_LENGTH: Final = struct.Struct(">i")
_GONE: Final = frozenset((errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN, errno.EBADF))


class RingSpace:
    """Contiguous reservations in a ring of `size` bytes, released in any order (pure core).

    Positions are logical (they only grow); a reservation's bytes are at logical % size and
    never wrap: one that would is placed at the ring's start, and the skipped end stays in use
    until the reservations before it are released. Everything in [tail, head) is in use, so
    head - tail <= size means no two live reservations share a byte."""

    __slots__ = ("_done", "_order", "head", "size", "tail")

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"ring size {size}")
        self.size = size
        self.head = 0
        self.tail = 0
        self._order: deque[int] = deque()  # starts of the live reservations, oldest first
        self._done: set[int] = set()  # starts released out of order, not yet passed by tail

    @property
    def live(self) -> int:
        """Reservations not released yet."""
        return len(self._order) - len(self._done)

    def reserve(self, n: int) -> int | None:
        """The logical start of n contiguous bytes, or None when they are not free now."""
        if n <= 0 or n > self.size:
            raise ValueError(f"reservation of {n} bytes in a ring of {self.size}")
        start = self.head
        phys = start % self.size
        if phys and (phys + n > self.size or not self._order):
            start += self.size - phys  # to the ring's start (empty: its first pages are warm)
        if not self._order:
            self.tail = start  # nothing live: the skipped end is free at once
        if start + n - self.tail > self.size:
            return None
        self._order.append(start)
        self.head = start + n
        return start

    def release(self, start: int) -> None:
        """Free the reservation that starts at `start` (ValueError: no such live one)."""
        order = self._order
        if not order or start in self._done or not order[0] <= start <= order[-1]:
            raise ValueError(f"no live reservation at {start}")
        if start != order[0]:
            if start not in order:
                raise ValueError(f"no live reservation at {start}")
            self._done.add(start)
            return
        order.popleft()
        done = self._done
        while order and order[0] in done:
            done.discard(order.popleft())
        self.tail = order[0] if order else self.head


class SharedRing:
    """A RingSpace over a memfd mapping (the pull actor's side: read-write)."""

    __slots__ = ("fd", "mm", "retiring", "ring_id", "single", "space", "view")

    def __init__(self, ring_id: int, size: int, single: bool = False) -> None:
        self.ring_id = ring_id
        self.single = single  # one answer too large for a connection's ring: used once
        self.retiring = single  # closed once nothing in it is live
        fd = os.memfd_create(f"actormq-pull-{ring_id}", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self.fd: int | None = fd  # closed once the user's process has it
        self.view = memoryview(self.mm)
        self.space = RingSpace(size)

    def close(self) -> None:
        """Close the descriptor and unmap (the mapping stays while a view of it is held)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        _unmap(self.ring_id, self.mm, self.view)


@dataclass(slots=True)
class Slot:
    """One frame's reserved space: ring, logical start (the release token), physical
    offset, size; claimed once an answer forwarded from it owns it."""

    ring: SharedRing
    token: int
    at: int
    size: int
    claimed: bool = False


@dataclass(frozen=True, slots=True)
class RingRef:
    """Where a forwarded pull body lies: ring, token to release, offset and length."""

    ring_id: int
    token: int
    offset: int
    length: int


class Recv(Protocol):
    """What a RingReader reads from: a socket's recv_into, or a TLS session's plaintext
    (BlockingIOError when nothing is there now, 0 at the end, OSError when it fails)."""

    def recv_into(self, view: memoryview) -> int: ...


Announce = Callable[[SharedRing], bool]  # hand a new ring's descriptor over; False: not now
Retired = Callable[[int], None]  # an announced ring is closed: the user's process unmaps it


class PullRings:
    """The pull actor's rings: one per broker connection (made on its first frame) and the
    single-use ones of large answers.

    `announce` gives a ring's descriptor to the user's process before any answer in it is
    forwarded; a reservation waits while it cannot. `retired` tells it a ring it mapped is
    closed. `current` is the frame being dispatched: an answer callback claims it to forward
    its body by reference."""

    def __init__(self, announce: Announce, retired: Retired, size: int = RING_SIZE) -> None:
        self.announce = announce
        self.retired = retired
        self.size = size
        self._ids = 0
        self.rings: dict[int, SharedRing] = {}  # announced and not closed yet
        self.refused: set[int] = set()  # rings the user's process could not map
        self.current: Slot | None = None
        self.paused: set[RingReader] = set()  # readers waiting for space
        # a new ring could not be handed over (the channel took nothing): no release will
        # come for it, so the actor retries on a timer while this is set
        self.announce_failed = False

    def _new(self, size: int, single: bool) -> SharedRing | None:
        self._ids += 1
        ring = SharedRing(self._ids, size, single)
        self.announce_failed = not self.announce(ring)
        if self.announce_failed:
            ring.close()
            return None
        self.rings[ring.ring_id] = ring
        return ring

    def reserve(self, reader: RingReader, n: int) -> Slot | None:
        """Space for a frame of n bytes read by reader, or None (no space now, or a new ring
        cannot be handed over now)."""
        if n > self.size // 4:
            ring = self._new(n, True)
            if ring is None:
                return None
            start = ring.space.reserve(n)
            assert start == 0
            return Slot(ring, 0, 0, n)
        ring = reader.ring
        if ring is None:
            ring = reader.ring = self._new(self.size, False)
            if ring is None:
                return None
        start = ring.space.reserve(n)
        if start is None:
            return None
        return Slot(ring, start, start % ring.space.size, n)

    def claim(self, body: memoryview) -> RingRef | None:
        """The current frame for the answer whose body is `body` (a view of that frame's end),
        now owned by the user's process until it releases it; None: not a ring frame, or one
        the user's process cannot read."""
        slot = self.current
        if slot is None or slot.claimed or body.obj is not slot.ring.mm:
            return None
        n = len(body)
        if n > slot.size or slot.ring.ring_id in self.refused:
            return None
        slot.claimed = True
        return RingRef(slot.ring.ring_id, slot.token, slot.at + slot.size - n, n)

    def settle(self, slot: Slot) -> None:
        """After its dispatch: free a frame no answer claimed."""
        if not slot.claimed:
            self._free(slot.ring, slot.token)

    def release(self, ring_id: int, token: int) -> None:
        """The user's process is done with a forwarded answer (ValueError: unknown; nothing
        changes then)."""
        ring = self.rings.get(ring_id)
        if ring is None:
            raise ValueError(f"no ring {ring_id}")
        self._free(ring, token)

    def refuse(self, ring_id: int) -> None:
        """The user's process could not map this ring: forward its answers by copy."""
        self.refused.add(ring_id)

    def abandon(self, reader: RingReader) -> None:
        """reader's connection closed: free the frame it was reading, retire its ring."""
        self.paused.discard(reader)
        slot = reader.drop_frame()
        if slot is not None:
            self._free(slot.ring, slot.token)
        ring, reader.ring = reader.ring, None
        if ring is not None:
            ring.retiring = True
            self._free(ring, None)

    def _free(self, ring: SharedRing, token: int | None) -> None:
        if token is not None:
            ring.space.release(token)
        if ring.retiring and not ring.space.live and \
                self.rings.pop(ring.ring_id, None) is not None:
            ring.close()
            self.refused.discard(ring.ring_id)
            self.retired(ring.ring_id)

    def close(self) -> None:
        """Unmap every ring (the actor is stopping)."""
        self.current = None
        for ring in self.rings.values():
            ring.close()
        self.rings.clear()


class RingReader:
    """Reads one connection's frames straight into PullRings' space: the length, then the
    frame into its reservation. Holds a frame's reservation while the frame arrives; waits
    (paused, in rings.paused) while no space can be reserved."""

    __slots__ = ("_filled", "_got", "_len", "_need", "_slot", "max_frame", "ring", "rings")

    def __init__(self, rings: PullRings, max_frame: int) -> None:
        self.rings = rings
        self.ring: SharedRing | None = None  # this connection's (made on its first frame)
        self.max_frame = max_frame
        self._len = bytearray(4)
        self._got = 0
        self._need = 0  # the frame's size once its length is read, while no slot is had
        self._slot: Slot | None = None
        self._filled = 0

    @property
    def paused(self) -> bool:
        return self in self.rings.paused

    def drop_frame(self) -> Slot | None:
        """Forget the frame being read (its connection closed): its slot, if it had one."""
        slot, self._slot, self._need, self._got = self._slot, None, 0, 0
        return slot

    def resume(self) -> bool:
        """Try to reserve the space waited for; True when reading may go on."""
        if self._need and self._slot is None:
            slot = self.rings.reserve(self, self._need)
            if slot is None:
                return False
            self._slot, self._need, self._filled = slot, 0, 0
        self.rings.paused.discard(self)
        return True

    def read(self, source: Recv) -> tuple[list[Slot], str | None]:
        """What the socket (or a TLS session's plaintext: a Recv) has now: the frames
        completed (each in its slot) and why the connection must close (None: it stays
        open)."""
        recv_into = source.recv_into
        done: list[Slot] = []
        if self.paused and not self.resume():
            return done, None
        budget = READ_BUDGET
        lens = memoryview(self._len)
        while budget > 0:
            slot = self._slot
            try:
                if slot is None:
                    n = recv_into(lens[self._got :])
                else:
                    at = slot.at + self._filled
                    n = recv_into(slot.ring.view[at : slot.at + slot.size])
            except (BlockingIOError, InterruptedError):
                return done, None
            except OSError as exc:
                if exc.errno not in _GONE:
                    log.warning("recv failed: %s", exc)
                return done, f"recv failed: {exc}"
            if n == 0:
                return done, "closed by peer"
            budget -= n
            if slot is not None:
                self._filled += n
                if self._filled == slot.size:
                    done.append(slot)
                    self._slot = None
                continue
            self._got += n
            if self._got < 4:
                continue
            self._got = 0
            (total,) = _LENGTH.unpack_from(self._len, 0)
            try:
                frame_size(total, self.max_frame)
            except ProtocolError as exc:
                return done, f"bad frame: {exc}"
            self._need = total
            if not self.resume():
                self.rings.paused.add(self)
                return done, None
        return done, None


class MappedRings:
    """The user's process's read-only mappings of the pull actor's rings, and the releases
    owed for the answers it has read (I/O thread)."""

    def __init__(self) -> None:
        self.maps: dict[int, tuple[mmap.mmap, memoryview]] = {}
        self.owed: list[tuple[int, int]] = []

    def add(self, ring_id: int, size: int, fd: int | None) -> None:
        """Map a ring announced with its descriptor (closed here, mapped or not)."""
        if fd is None:
            raise ValueError(f"pull ring {ring_id} arrived without its descriptor")
        try:
            mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.maps[ring_id] = (mm, memoryview(mm))

    def view(self, ref: RingRef) -> memoryview:
        """The bytes a PULL_AT names (KeyError: an unknown ring)."""
        view = self.maps[ref.ring_id][1]
        if ref.offset < 0 or ref.offset + ref.length > len(view):
            raise ValueError(f"pull ring {ref.ring_id}: {ref} is outside the ring")
        return view[ref.offset : ref.offset + ref.length]

    def done(self, ref: RingRef) -> None:
        """The answer at ref is read: owe its release."""
        self.owed.append((ref.ring_id, ref.token))

    def take_owed(self) -> list[tuple[int, int]]:
        owed, self.owed = self.owed, []
        return owed

    def retire(self, ring_id: int) -> None:
        """The actor closed this ring: unmap it (nothing read from it is still in use)."""
        entry = self.maps.pop(ring_id, None)
        if entry is not None:
            _unmap(ring_id, *entry)

    def close(self) -> None:
        for ring_id in list(self.maps):
            self.retire(ring_id)


def _unmap(ring_id: int, mm: mmap.mmap, view: memoryview) -> None:
    try:
        view.release()
        mm.close()
    except BufferError:  # a view of it is still held: the mapping goes with the last one
        log.error("pull ring %d: a view of it outlived its answer", ring_id)
