"""The log file's flood guard (deploy.actor_logging.RecordThrottle): a peer that makes a broker
warn on every request cannot fill the disk with one template's records."""

from __future__ import annotations

from deploy.actor_logging import RecordThrottle

KEY = ("actors.core", "request type %d not supported")


def test_a_flood_writes_a_burst_per_window_then_says_how_many_were_left_out() -> None:
    t = RecordThrottle(burst=3, window_s=10.0)
    got = [t.admit(KEY, 100.0 + i * 0.01) for i in range(50)]
    assert [w for w, _ in got] == [True] * 3 + [False] * 47
    assert all(n == 0 for _, n in got)
    assert t.admit(KEY, 110.0) == (True, 47)  # the next window's first record reports them
    assert t.admit(KEY, 110.1) == (True, 0)


def test_templates_are_counted_apart_and_a_quiet_window_reports_nothing() -> None:
    t = RecordThrottle(burst=1, window_s=1.0)
    other = ("actors.core", "bad request code=%d: %s")
    assert t.admit(KEY, 0.0) == (True, 0)
    assert t.admit(other, 0.1) == (True, 0)
    assert t.admit(KEY, 0.2) == (False, 0)
    assert t.admit(KEY, 5.0) == (True, 1)
    assert t.admit(KEY, 10.0) == (True, 0)
