"""WatchingActor linger loop without an actor system: passes, inline timers, hand-back rules."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from thespian.actors import ActorAddress, ThespianWatch, WakeupMessage, WatchMessage

from actors.runtime.channel import LINK, RecordDecoder, add_link
from actors.runtime.link_records import HoldsChanged, decode, encode
from actors.runtime.watch import AFFINITY_ENV, WatchingActor, parse_affinity, pin_cpus


class _Ref:
    """Stands in for Thespian's ActorManager: records sends and wakeups, has no transport."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.wakeups: list[Any] = []

    def actor_send(self, target: Any, msg: Any) -> None:
        self.sent.append(msg)

    def wakeupAfter(self, period: Any, payload: Any) -> None:
        self.wakeups.append(payload)


class _PingActor(WatchingActor):
    """Reads one byte per pass and writes the next one until `limit` passes were served."""

    LINGER_IDLE_MS = 50.0
    LINGER_CAP_MS = 10_000.0

    def __init__(self, sock: socket.socket, peer: socket.socket, limit: int) -> None:
        super().__init__()
        self._myRef = _Ref()
        self.sock = sock
        self.peer = peer
        self.limit = limit
        self.passes = 0
        self.timers: list[str] = []
        self.send_at = -1
        self.timer_at = -1
        self.set_watch_fds([sock.fileno()])

    def on_ready(self, fds: list[int]) -> None:
        self.sock.recv(16)
        self.passes += 1
        if self.passes == self.timer_at:
            self.schedule("t", 0.0)
        if self.passes == self.send_at:
            self.send(ActorAddress(1), "control")
        if self.passes < self.limit:
            self.peer.send(b"x")  # more traffic: the loop must serve it without Thespian

    def on_timer(self, key: str) -> None:
        self.timers.append(key)


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    return a, b


def test_linger_serves_traffic_then_returns_when_idle() -> None:
    a, b = _pair()
    try:
        actor = _PingActor(a, b, limit=20)
        b.send(b"x")
        ret = actor.receiveMessage(WatchMessage([a.fileno()]), None)
        assert isinstance(ret, ThespianWatch)
        assert ret.filenos == [actor._ep.fileno()]  # Thespian watches our one epoll
        assert actor.passes == 20
        assert actor.linger_passes == 19  # all but the first came from our own epoll
    finally:
        a.close()
        b.close()


def test_due_timer_runs_inside_linger_and_its_wakeup_is_ignored() -> None:
    a, b = _pair()
    try:
        actor = _PingActor(a, b, limit=5)
        actor.timer_at = 2
        b.send(b"x")
        actor.receiveMessage(WatchMessage([a.fileno()]), None)
        assert actor.timers == ["t"]
        payload = actor._myRef.wakeups[-1]
        actor.receiveMessage(WakeupMessage(None, payload), None)  # the late Thespian wakeup
        assert actor.timers == ["t"]
    finally:
        a.close()
        b.close()


def test_thespian_send_hands_control_back_at_once() -> None:
    a, b = _pair()
    try:
        actor = _PingActor(a, b, limit=50)
        actor.send_at = 3
        b.send(b"x")
        actor.receiveMessage(WatchMessage([a.fileno()]), None)
        assert actor.passes == 3
        assert actor._myRef.sent == ["control"]
    finally:
        a.close()
        b.close()


def test_no_linger_when_disabled() -> None:
    a, b = _pair()
    try:
        actor = _PingActor(a, b, limit=50)
        actor.LINGER_IDLE_MS = 0.0
        b.send(b"x")
        actor.receiveMessage(WatchMessage([a.fileno()]), None)
        assert actor.passes == 1
        assert actor.linger_passes == 0
    finally:
        a.close()
        b.close()


def test_watch_and_unwatch_change_the_one_epoll_thespian_watches() -> None:
    a, b = _pair()
    c, d = _pair()
    try:
        actor = _PingActor(a, b, limit=1)
        ep = actor._ep
        actor.watch(c.fileno())
        assert actor._ep is ep and actor.watched() == {a.fileno(), c.fileno()}
        d.send(b"y")
        assert actor._ready_fds() == [c.fileno()]
        actor.unwatch(c.fileno())
        assert actor._ready_fds() == []
        assert actor.watch_fds() == [ep.fileno()]
        actor.set_watch_fds([])
        assert actor.watch_fds() == []  # nothing watched: Thespian watches nothing
    finally:
        for s in (a, b, c, d):
            s.close()


def test_a_descriptor_closed_while_another_process_holds_it_is_dropped() -> None:
    a, b = _pair()
    c, d = _pair()
    try:
        actor = _PingActor(a, b, limit=1)
        actor.watch(c.fileno())
        held = os.dup(c.fileno())  # as a child forked since would hold it
        stale = c.fileno()
        actor._watched.discard(stale)  # closed without unwatch: epoll keeps it (held elsewhere)
        c.close()
        d.send(b"y")
        assert actor._ready_fds() == []  # the stale registration is noticed, the epoll rebuilt
        d.send(b"y")
        assert actor._ready_fds() == []
        assert actor.watched() == {a.fileno()}
        os.close(held)
    finally:
        for s in (a, b, c, d):
            s.close()


def test_holds_record_round_trip() -> None:
    out = bytearray()
    add_link(out, encode(HoldsChanged(True)))
    add_link(out, encode(HoldsChanged(False)))
    recs = RecordDecoder().feed(bytes(out))
    assert [r[0] for r in recs] == [LINK, LINK]
    assert [decode(r[1]) for r in recs] == [HoldsChanged(True), HoldsChanged(False)]


def test_events_record_groups_by_audience_and_skips_origin() -> None:
    import pickle

    from actors.runtime.channel import APPLY, EVENTS, add_apply, events_record
    from tests.support.echo_broker import EchoPing

    rec = events_record("admin", [EchoPing(1), EchoPing(2)])
    ((rtype, origin, by_group, full),) = RecordDecoder().feed(rec)
    assert (rtype, origin) == (EVENTS, "admin")
    assert set(by_group) == {"pull"}
    assert pickle.loads(by_group["pull"]) == [EchoPing(1), EchoPing(2)]
    assert pickle.loads(full) == [EchoPing(1), EchoPing(2)]
    assert events_record("pull", [EchoPing(3)]) != rec
    ((_, _, only_origin, _),) = RecordDecoder().feed(events_record("pull", [EchoPing(3)]))
    assert only_origin == {}  # the origin already applied its own events
    out = bytearray()
    add_apply(out, by_group["pull"])
    ((atype, blob),) = RecordDecoder().feed(bytes(out))
    assert atype == APPLY
    assert pickle.loads(blob) == [EchoPing(1), EchoPing(2)]


def test_parse_affinity_reads_roles_and_skips_bad_parts() -> None:
    table = parse_affinity("RemotingServer:0, send:1+2,bad:x,:3,empty:")
    assert table == {"RemotingServer": {0}, "send": {1, 2}}
    assert parse_affinity(None) == {} and parse_affinity("") == {}


class _SendGroupActor(_PingActor):
    def process_role(self) -> str:
        """Named after its group, as a ProcessorActor is."""
        return "send"


def test_first_watch_message_pins_the_actor_by_group(monkeypatch: Any) -> None:
    pinned: list[tuple[int, set[int]]] = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: pinned.append((pid, cpus)))
    monkeypatch.setenv(AFFINITY_ENV, "other:1,send:0")
    a, b = socket.socketpair()
    try:
        actor = _SendGroupActor(a, b, limit=1)
        actor.LINGER_IDLE_MS = 0.0
        b.send(b"x")
        actor.receiveMessage(WatchMessage([a.fileno()]), None)
        b.send(b"x")
        actor.receiveMessage(WatchMessage([a.fileno()]), None)
        assert pinned == [(0, {0})]  # once, for its group
    finally:
        a.close()
        b.close()


def test_pin_cpus_without_a_matching_role_does_nothing(monkeypatch: Any) -> None:
    pinned: list[Any] = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: pinned.append(cpus))
    assert pin_cpus("RemotingServer", "send:1") is None
    assert pin_cpus("send", "send:1") == {1}
    assert pinned == [{1}]



_FAULT_CHILD = """
import mmap, os, signal, sys
signal.signal(signal.SIGBUS, lambda *_: None)  # what Thespian's startChild installs
if sys.argv[2] == "fixed":
    from actors.runtime.watch import default_fault_signals
    default_fault_signals()
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
os.ftruncate(fd, 8192)
mm = mmap.mmap(fd, 8192)
os.ftruncate(fd, 0)  # the mapping now reaches past the file's end: a store there is SIGBUS
mm[4096] = 1
print("survived")
"""


def test_fault_signals_end_the_actor_instead_of_spinning(tmp_path: Path) -> None:
    """With Python's handler a SIGBUS returns to the faulting store, which faults again forever
    (issue #20: the send actor at 100 % of a core); with the default action the process dies."""
    checkout = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-c", _FAULT_CHILD, str(tmp_path / "f"), "fixed"],
                          capture_output=True, timeout=60, cwd=checkout)  # fmt: skip
    assert proc.returncode == -signal.SIGBUS, proc
    assert b"survived" not in proc.stdout
