"""deploy.launch's StopSignal: SIGTERM / Ctrl-C interrupt a command's start steps only."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from deploy.launch import StartInterrupted, starting, stop_event


@pytest.fixture
def restored_handlers() -> Iterator[None]:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_a_signal_interrupts_the_start_steps_and_then_only_sets_the_event(
    restored_handlers: None,
) -> None:
    stop = stop_event()
    with pytest.raises(StartInterrupted, match="SIGTERM"), starting(stop):
        os.kill(os.getpid(), signal.SIGTERM)  # handled before the next bytecode
        pytest.fail("the start step went on")
    assert stop.is_set() and not stop.starting
    os.kill(os.getpid(), signal.SIGINT)  # stopping now (the cluster's stop): no raise


def test_a_signal_outside_the_start_steps_only_sets_the_event(restored_handlers: None) -> None:
    stop = stop_event()
    os.kill(os.getpid(), signal.SIGTERM)  # before the start steps: they run, serve returns
    assert stop.is_set()
    with starting(stop):
        pass  # a start that failed (StartError) leaves this block too: the stop is quiet
    os.kill(os.getpid(), signal.SIGTERM)
    assert not stop.starting
