"""on_fresh_stack: a serving loop's calls stop mapping and unmapping interpreter stack chunks.

Counted, not timed: a freshly mapped 16 KiB chunk costs minor page faults when its frames are
written, so a call chain that crosses a chunk boundary on every call shows about one fault
per call (CPython 3.11), and none once it runs above on_fresh_stack.
"""

from __future__ import annotations

import resource
from collections.abc import Callable

import pytest

from actors.runtime.stack_chunk import CHUNK_SLOTS, on_fresh_stack

CALLS = 2000


def _leaf(a: int) -> int:
    x0 = x1 = x2 = x3 = x4 = x5 = x6 = x7 = a  # a frame of some size
    return x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7


def _chain(a: int) -> int:
    return _leaf(a) + 1


def _loop() -> int:
    """Page faults over CALLS calls of a short chain (the serving loop's per-request work)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(CALLS):
        _chain(i)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _at_depth(depth: int, fn: Callable[[], int]) -> int:
    """fn() called `depth` frames deeper than here."""
    return fn() if depth == 0 else _at_depth(depth - 1, fn)


def _worst(fresh: bool) -> int:
    """The most faults over every dispatch depth within a couple of chunks."""
    run = (lambda: on_fresh_stack(_loop)) if fresh else _loop
    return max(_at_depth(d, run) for d in range(400))


def test_passes_arguments_results_and_exceptions() -> None:
    assert on_fresh_stack(lambda a, b: a * b, 6, 7) == 42
    assert on_fresh_stack.__code__.co_nlocals > CHUNK_SLOTS

    def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        on_fresh_stack(boom)


def test_no_chunk_churn_above_the_trampoline() -> None:
    _worst(True)  # warm-up: the interpreter's own first allocations
    without = _worst(False)
    assert without >= CALLS // 2, "CPython no longer unmaps chunks on pop: trampoline needed?"
    assert _worst(True) < CALLS // 20
