"""deploy.shutdown_hook's StopSignal and start_steps: SIGTERM / Ctrl-C only set the event (never an
exception raised into whatever the main thread runs); the start steps run in a thread of
their own and the main thread ends the start when the signal arrives."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from deploy.launch import LocalCluster, StartError, stable_free_port
from deploy.shutdown_hook import StartInterrupted, start_steps, stop_event


@pytest.fixture
def restored_handlers() -> Iterator[None]:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def _cluster(tmp_path) -> LocalCluster:
    """A cluster record whose admin port nobody listens on: its admin reads as gone."""
    return LocalCluster(None, stable_free_port(), str(tmp_path), str(tmp_path / "run"))


def test_the_handler_only_sets_the_event(restored_handlers: None) -> None:
    stop = stop_event()
    os.kill(os.getpid(), signal.SIGTERM)  # handled before the next bytecode: no raise
    assert stop.is_set() and stop.signame == "SIGTERM"
    os.kill(os.getpid(), signal.SIGINT)
    assert stop.signame == "SIGTERM"  # the first signal names the stop


def test_the_steps_value_and_errors_reach_the_caller(restored_handlers: None, tmp_path) -> None:
    stop = stop_event()
    cluster = _cluster(tmp_path)
    ran_in: list[str] = []

    def steps() -> int:
        ran_in.append(threading.current_thread().name)
        return 7

    assert start_steps(cluster, stop, steps) == 7
    assert ran_in == ["actormq-start"] and cluster.interrupt is None

    def failing() -> None:
        raise StartError("port 1 is in use")

    with pytest.raises(StartError, match="port 1"):
        start_steps(cluster, stop, failing)
    assert not cluster.abandoned


def test_a_signal_before_the_steps_end_interrupts_them(restored_handlers: None, tmp_path) -> None:
    """The steps ran to their end (no wait of theirs saw the signal): still a stop."""
    stop = stop_event()
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(StartInterrupted, match="SIGTERM"):
        start_steps(_cluster(tmp_path), stop, lambda: None)


def test_steps_stuck_on_a_gone_admin_are_abandoned_at_once(
    restored_handlers: None, tmp_path
) -> None:
    """As inside Thespian's createActor for an admin the same signal ended: the main thread
    does not wait for the steps; the cluster is marked so stop_cluster only reaps."""
    stop = stop_event()
    cluster = _cluster(tmp_path)
    entered, release = threading.Event(), threading.Event()

    def stuck() -> None:
        entered.set()
        release.wait(30.0)

    def signal_when_inside() -> None:
        assert entered.wait(10.0)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=signal_when_inside)
    killer.start()
    try:
        with pytest.raises(StartInterrupted, match="SIGTERM"):
            start_steps(cluster, stop, stuck)
        assert cluster.abandoned and cluster.interrupt is None
    finally:
        release.set()
        killer.join(10.0)
