"""The buffers pull answers' bodies are read into, used again: the part of Netty's
PooledByteBufAllocator (the allocator of RocketMQ 4.9.x's NettyRemotingClient) a consumer's
reads need.

Each FOUND answer's body is read into a buffer of its own and handed over; the decoder's
lazy records refer to it until their messages are consumed (message_decoder). A new
bytearray for a pull answer's ~36 KiB cost 7-9 us a frame in a backlog drain, more than the
frame's header decode: malloc, page faults on memory the heap had given back, and a zero
fill that recv then overwrites. Instead, once the records are gone the buffer is kept (up to
POOL_MAX of them, each of BUF_MIN to BUF_MAX bytes) and the next frame's body is read into it,
resized in place.

The records say when they are gone: the decoder puts one `Lease` of the buffer in the
records it makes, and the lease's `__del__` runs when the last of them is freed or decoded,
on whichever thread that is, and offers the buffer back. An offer is a hint, not a proof:
`take` uses a buffer again only when its reference count shows that the pool's is the only
reference left (a view of it, an answer still being handled or a record made without a
lease each hold one), so nothing can see a buffer it reuses.
"""

from __future__ import annotations

import sys
from collections import deque
from typing import Final

POOL_MAX: Final = 64  # free buffers kept
BUF_MIN: Final = 4096  # a smaller body gets a buffer of its own (an empty pull, a remark)
BUF_MAX: Final = 256 * 1024  # a larger buffer is freed, not kept

_offered: deque[bytearray] = deque()
_refs = sys.getrefcount
_ONLY_OURS: Final = 2  # take()'s local name and getrefcount's argument


class Lease:
    """The records of one buffer hold this: when the last of them lets go, the buffer is
    offered back."""

    __slots__ = ("buf",)

    def __init__(self, buf: bytearray) -> None:
        self.buf = buf

    def __del__(self, _offered: deque[bytearray] = _offered, _keep: int = POOL_MAX,
                _min: int = BUF_MIN, _max: int = BUF_MAX) -> None:  # fmt: skip
        # bound at definition: module globals may be gone when the interpreter shuts down
        if len(_offered) < _keep and _min <= self.buf.__alloc__() <= _max:
            _offered.append(self.buf)


def take(n: int) -> bytearray:
    """A buffer of n bytes, its content undefined: an offered one nobody else refers to,
    resized in place (a bytearray moves only to grow past what it has allocated), or a
    new one."""
    if n < BUF_MIN:
        return bytearray(n)
    while _offered:
        try:
            b = _offered.popleft()
        except IndexError:  # another thread's take: none is left
            break
        if _refs(b) != _ONLY_OURS:
            continue  # still referred to: left to its other owners
        have = len(b)
        if have > n:
            del b[n:]
        elif have < n:
            b += bytes(n - have)
        return b
    return bytearray(n)


def offered() -> int:
    """How many buffers are offered back now (free or not)."""
    return len(_offered)
