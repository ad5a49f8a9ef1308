"""Run an actor's serving loop at the start of a fresh interpreter data-stack chunk.

Part of the event-loop half of remoting/netty/NettyRemotingServer.java, RocketMQ 4.9.x (the
selector thread's serving loop; see actors.runtime.watch), for a CPython 3.11 cost: frames
live in 16 KiB "data stack" chunks, and a chunk is unmapped as soon as the frame at its base
returns. An actor serves from deep inside Thespian's call stack, so when its per-request call
chain happens to cross a chunk boundary, every request maps and unmaps a chunk (measured on
the pull actor under broker benchmark C: 5.3 mmap + munmap pairs per PULL_MESSAGE, about
half of that actor's CPU per pull). Whether a chain crosses depends on the stack depth at
dispatch, i.e. on unrelated code. `on_fresh_stack` calls through a frame larger than a
chunk, which always starts a new (32 KiB) chunk and stays at its base while the loop runs:
what the loop calls has ~15 KiB of room above it, and one chunk is mapped per call instead of
several per request. One call costs ~16 us (the mapping and its page faults): data-plane
actors take it once per readiness turn, which their linger loop stretches over many requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

CHUNK_SLOTS: Final = 2048  # CPython 3.11's DATA_STACK_CHUNK_SIZE (16 KiB) in 8-byte slots
_PAD: Final = CHUNK_SLOTS + 64  # a frame this large never fits in a 16 KiB chunk's room


def _make_trampoline() -> Callable[..., Any]:
    """`trampoline(fn, *args)`: fn(*args) called from a frame of _PAD never-assigned locals
    (the compiler makes them locals; the dead branch never runs)."""
    names = " = ".join(f"_p{i}" for i in range(_PAD))
    src = (f"def on_fresh_stack(fn, *args):\n    if False:\n        {names} = None\n"
           "    return fn(*args)\n")
    ns: dict[str, Any] = {}
    exec(compile(src, __file__, "exec"), ns)  # generated from the constant above only
    fn: Callable[..., Any] = ns["on_fresh_stack"]
    fn.__doc__ = "fn(*args), from the base of a fresh data-stack chunk."
    return fn


on_fresh_stack: Final = _make_trampoline()
