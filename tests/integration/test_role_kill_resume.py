"""Push consumers resume at once when a broker role is replaced (issue #20 item 3).

Each test runs `actormq up` as a user does (a subprocess, the real broker), starts real push
consumers (ours in this process; the reference's Java 4.9.8 client in a JVM), waits until
their pulls are held at the broker, then kills one role with SIGKILL by PID (the pull actor,
the RemotingServer), or the whole `up` tree and starts it again on the same ports, and
measures how long until a message sent to each queue after the kill is consumed.

Before: ~30 s every time. A killed pull actor took its held pulls with it, and each waited
out the client's 30 s timeout; after a RemotingServer kill or a restart the broker had
forgotten the consumer (its connection closed), and every pull was refused "the consumer's
group info not exist" (code 24) until the client's next heartbeat, 30 s apart. Now the
RemotingServer answers what the dead pull actor had taken once its replacement listens
(actors.runtime.request_ledger), and our client heartbeats a broker that refuses it at once
(actors.client.consumer.pull_callback). A Java client after a RemotingServer kill still took
~31 s: its held pull waited for its timeout (a FIN does not fail a Java client's pending
requests, a reset does), then it was refused until its heartbeat. Now the dead RemotingServer's
connections are reset (actors.runtime.tcp, reset_if_killed) and the broker keeps their
registrations (lost channels, actors.broker.consumer_manager). RESUME_BOUND_S is generous
for a loaded 2-core host and far below the old figures: the kills come a few seconds after the
consumers started, so their next periodic heartbeat is ~25 s away.

`pytest -s` prints the measured resume times.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.client.consumer import ConsumeResult, PushConsumer
from deploy import launch
from deploy.wire import BlockingClient
from tests.integration.conftest import MarkedProcess, kill_pids, wait_gone
from tests.integration.e2e_helpers import (
    SMALL_STORE,
    create_topic_cmd,
    msg_props,
    role_pids,
    send_cmd,
    wait_route,
    wait_until,
)

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
TOPIC = "ResumeT"
QUEUES = 4
RESUME_BOUND_S = 10.0  # kill -> a message sent after it consumed from every queue (old: ~30 s)
# the same for a Java consumer after a RemotingServer kill: 1 s of it is the Java client's own
# pause after a failed pull, pullTimeDelayMillsWhenException (old: ~31 s)
JAVA_RS_BOUND_S = 12.0
FIRST_S = 30.0  # a fresh consumer's first messages (rebalance, first pulls)
HELD_S = 1.5  # after its first messages, each queue's next pull is held at the broker
SEND_TRY_S = 2.0


class UpRun:
    """`actormq up` with SMALL_STORE on fixed free ports: started again by start()."""

    def __init__(self, tmp_path: Path, **props: str) -> None:
        self.tmp = tmp_path
        self.ns_port = launch.stable_free_port()
        self.port = launch.stable_free_port(pair=True)
        conf = tmp_path / "up.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in {**SMALL_STORE, **props}.items()))
        self.argv = [sys.executable, "-m", "deploy", "up", "--data", str(tmp_path / "data"),
                     "-c", str(conf), "--namesrv-port", str(self.ns_port), "--broker-port",
                     str(self.port), "--spark-bridge-port", "0"]  # fmt: skip
        self.runs: list[MarkedProcess] = []

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def start(self) -> MarkedProcess:
        """Start it (again) and wait until the broker listens (bounded)."""
        run = MarkedProcess(self.argv, self.tmp / f"up{len(self.runs)}", os.getcwd())
        self.runs.append(run)
        run.wait_for(f"listening on 127.0.0.1:{self.port} (", 60.0)
        return run

    def stop(self) -> None:
        for run in self.runs:
            run.stop()


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Callable[..., UpRun]]:
    made: list[UpRun] = []

    def make(**props: str) -> UpRun:
        u = UpRun(tmp_path, **props)
        made.append(u)
        u.start()
        with BlockingClient(("127.0.0.1", u.port)) as c:
            assert c.invoke(create_topic_cmd(TOPIC, QUEUES), 10.0).code == 0
        assert wait_route(("127.0.0.1", u.ns_port), TOPIC, True, 10.0).code == 0
        return u

    yield make
    for u in made:
        u.stop()


class Received:
    """A push consumer's handler: when each body was first consumed."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.count = 0  # deliveries, a body consumed twice counted twice
        self.lock = threading.Lock()

    def __call__(self, msgs: tuple[Any, ...]) -> ConsumeResult:
        now = time.monotonic()
        with self.lock:
            for m in msgs:
                self.at.setdefault(m.body.decode(), now)
                self.count += 1
        return ConsumeResult.SUCCESS

    def times(self) -> dict[str, float]:
        with self.lock:
            return dict(self.at)


class JavaConsumer:
    """tests/clients/PrintingConsumer.java in its own JVM and session; stopped by closing its
    stdin, else by PID."""

    def __init__(self, cp: str, classes: str, namesrv: str, group: str, out: Path) -> None:
        self.out = out
        self.seen: dict[str, float] = {}  # body -> when this test first read its line
        with open(out, "wb") as f, open(out.with_suffix(".err"), "wb") as err:
            self.proc = subprocess.Popen(
                ["java", "-Drocketmq.client.rebalance.waitInterval=1000", "-cp",
                 f"{cp}:{classes}", "PrintingConsumer", namesrv, TOPIC, group],
                stdout=f, stderr=err, stdin=subprocess.PIPE, start_new_session=True)  # fmt: skip

    def times(self) -> dict[str, float]:
        now = time.monotonic()
        for line in self.out.read_text(errors="replace").splitlines():
            if line.startswith('{"event":"got"'):
                try:
                    self.seen.setdefault(json.loads(line)["body"], now)
                except ValueError:
                    pass  # a line still being written
        return dict(self.seen)

    def offsets(self) -> dict[int, set[int]]:
        """queue -> the queue offsets consumed there (duplicates once)."""
        got: dict[int, set[int]] = {}
        for line in self.out.read_text(errors="replace").splitlines():
            if line.startswith('{"event":"got"'):
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                got.setdefault(rec["queue"], set()).add(rec["offset"])
        return got

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            kill_pids([self.proc.pid])
            self.proc.wait(10)


def send_each_queue(port: int, tag: str, deadline: float) -> list[str]:
    """One message per queue, body f"{tag}-{queue}", each retried until the broker takes it
    (a RemotingServer being replaced refuses connections for a moment); bounded."""
    bodies = []
    for q in range(QUEUES):
        body = f"{tag}-{q}"
        while True:
            assert time.monotonic() < deadline, f"{body} never stored"
            try:
                with BlockingClient(("127.0.0.1", port)) as c:
                    if c.invoke(send_cmd(TOPIC, body.encode(), msg_props(), queue_id=q),
                                SEND_TRY_S).code == 0:  # fmt: skip
                        break
            except (OSError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.02)
        bodies.append(body)
    return bodies


def consumed_within(times: Callable[[], dict[str, float]], bodies: list[str], since: float,
                    bound_s: float) -> float | None:  # fmt: skip
    """Seconds from `since` until every body was consumed (None: not within bound_s)."""
    done = wait_until(lambda: all(b in times() for b in bodies) or None,
                      max(0.0, since + bound_s - time.monotonic()), 0.02)  # fmt: skip
    if not done:
        return None
    got = times()
    return max(got[b] for b in bodies) - since


def settle(times: Callable[[], dict[str, float]], port: int) -> None:
    """Until the consumer consumed one message of every queue, then until its next pulls are
    held (bounded)."""
    first = send_each_queue(port, "before", time.monotonic() + FIRST_S)
    assert consumed_within(times, first, time.monotonic(), FIRST_S) is not None, (
        f"first messages not consumed: {sorted(times())}")
    time.sleep(HELD_S)


def kill_role(run: MarkedProcess, role: str) -> float:
    """SIGKILL the one process of `role`; when (monotonic)."""
    pids = wait_until(lambda: role_pids(run.pids(), role) or None, 10.0, 0.05)
    assert pids and len(pids) == 1, f"not one {role}: {pids}"
    os.kill(pids[0], signal.SIGKILL)
    killed_at = time.monotonic()
    assert wait_gone(pids, 5.0) == []
    return killed_at


def push_consumer(u: UpRun, group: str, handler: Received) -> PushConsumer:
    c = PushConsumer(group, namesrv=u.namesrv, handler=handler, consume_from="first",
                     rebalance_interval_ms=1000.0, rebalance_retry_ms=200.0)
    c.start().subscribe(TOPIC)
    return c


DIRECT = pytest.mark.parametrize("direct", ["false", "true"],
                                 ids=["answers-through-remoting", "answers-direct"])


@DIRECT
def test_pull_actor_killed_our_push_consumer_resumes_at_once(up: Any, direct: str) -> None:
    u = up(directReplyToLocalClients=direct)
    rec = Received()
    c = push_consumer(u, "resume_pull_cg", rec)
    try:
        settle(rec.times, u.port)
        killed_at = kill_role(u.runs[-1], "pull")
        after = send_each_queue(u.port, "after-pull-kill", killed_at + RESUME_BOUND_S)
        took = consumed_within(rec.times, after, killed_at, RESUME_BOUND_S)
        assert took is not None, f"not resumed within {RESUME_BOUND_S} s: {sorted(rec.times())}"
        print(f"pull actor killed (direct={direct}): our push consumer resumed in {took:.2f} s")
    finally:
        c.close()


@DIRECT
def test_hold_service_killed_our_push_consumer_resumes_at_once(up: Any, direct: str) -> None:
    """The PullRequestHoldService actor holds every suspended pull: killed, the pull actor
    answers each pull it had handed over PULL_RETRY_IMMEDIATELY from the offset it asked for,
    the client pulls again, and the replacement holds (and wakes) those pulls. Nothing is lost
    and nothing consumed twice."""
    u = up(directReplyToLocalClients=direct)
    rec = Received()
    c = push_consumer(u, "resume_hold_cg", rec)
    try:
        settle(rec.times, u.port)
        killed_at = kill_role(u.runs[-1], "hold")
        after = send_each_queue(u.port, "after-hold-kill", killed_at + RESUME_BOUND_S)
        took = consumed_within(rec.times, after, killed_at, RESUME_BOUND_S)
        assert took is not None, f"not resumed within {RESUME_BOUND_S} s: {sorted(rec.times())}"
        assert wait_until(lambda: role_pids(u.runs[-1].pids(), "hold") or None, 10.0, 0.05)
        # long polling again at the replacement: a message sent now wakes a held pull
        time.sleep(HELD_S)
        again = send_each_queue(u.port, "held-again", time.monotonic() + RESUME_BOUND_S)
        assert consumed_within(rec.times, again, time.monotonic(), RESUME_BOUND_S) is not None
        assert rec.count == len(rec.at), "a message was consumed twice"
        print(f"hold service killed (direct={direct}): our push consumer resumed in {took:.2f} s")
    finally:
        c.close()


@pytest.fixture(scope="module")
def java_classes(reference_build: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[str, str]:  # fmt: skip
    from deploy.reference import client_classpath

    cp = client_classpath()
    out = tmp_path_factory.mktemp("resumejava")
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out),
                    str(CLIENTS / "PrintingConsumer.java")],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    return cp, str(out)


@DIRECT
def test_pull_actor_killed_java_push_consumer_resumes_at_once(
    up: Any, direct: str, java_classes: tuple[str, str], tmp_path: Path
) -> None:
    u = up(directReplyToLocalClients=direct)
    java = JavaConsumer(*java_classes, u.namesrv, "resume_java_cg", tmp_path / "java.out")
    try:
        settle(java.times, u.port)
        killed_at = kill_role(u.runs[-1], "pull")
        after = send_each_queue(u.port, "after-pull-kill", killed_at + RESUME_BOUND_S)
        took = consumed_within(java.times, after, killed_at, RESUME_BOUND_S)
        assert took is not None, f"not resumed within {RESUME_BOUND_S} s: {sorted(java.times())}"
        print(f"pull actor killed (direct={direct}): the Java 4.9.8 push consumer resumed in "
              f"{took:.2f} s")
    finally:
        java.stop()


def test_hold_service_killed_java_push_consumer_resumes_at_once(
    up: Any, java_classes: tuple[str, str], tmp_path: Path
) -> None:
    """A Java 4.9.8 push consumer maps the PULL_RETRY_IMMEDIATELY its held pulls get when the
    hold service dies to NO_MATCHED_MSG and pulls again at once from the same offset."""
    u = up()
    java = JavaConsumer(*java_classes, u.namesrv, "resume_java_hold_cg", tmp_path / "java.out")
    try:
        settle(java.times, u.port)
        killed_at = kill_role(u.runs[-1], "hold")
        after = send_each_queue(u.port, "after-hold-kill", killed_at + RESUME_BOUND_S)
        took = consumed_within(java.times, after, killed_at, RESUME_BOUND_S)
        assert took is not None, f"not resumed within {RESUME_BOUND_S} s: {sorted(java.times())}"
        assert java.offsets() == {q: {0, 1} for q in range(QUEUES)}  # nothing skipped
        print(f"hold service killed: the Java 4.9.8 push consumer resumed in {took:.2f} s")
    finally:
        java.stop()


@DIRECT
def test_remoting_server_killed_our_push_consumer_resumes_at_once(up: Any, direct: str) -> None:
    u = up(directReplyToLocalClients=direct)
    rec = Received()
    c = push_consumer(u, "resume_rs_cg", rec)
    try:
        settle(rec.times, u.port)
        killed_at = kill_role(u.runs[-1], "RemotingServer")
        after = send_each_queue(u.port, "after-rs-kill", killed_at + RESUME_BOUND_S)
        took = consumed_within(rec.times, after, killed_at, RESUME_BOUND_S)
        assert took is not None, f"not resumed within {RESUME_BOUND_S} s: {sorted(rec.times())}"
        print(f"RemotingServer killed (direct={direct}): our push consumer resumed in "
              f"{took:.2f} s")
    finally:
        c.close()


@DIRECT
def test_remoting_server_killed_java_push_consumer_resumes_at_once(
    up: Any, direct: str, java_classes: tuple[str, str], tmp_path: Path
) -> None:
    """The Java client fails a connection's pending pulls at once only when the connection is
    reset (a FIN leaves its held pull to its 30 s timeout), and it heartbeats only every 30 s:
    the broker resets its clients' connections when the RemotingServer dies and keeps their
    registrations, so the pull it sends 1 s later (pullTimeDelayMillsWhenException) on a new
    connection is served."""
    u = up(directReplyToLocalClients=direct)
    java = JavaConsumer(*java_classes, u.namesrv, "resume_java_rs_cg", tmp_path / "java.out")
    try:
        settle(java.times, u.port)
        killed_at = kill_role(u.runs[-1], "RemotingServer")
        after = send_each_queue(u.port, "after-rs-kill", killed_at + JAVA_RS_BOUND_S)
        took = consumed_within(java.times, after, killed_at, JAVA_RS_BOUND_S)
        assert took is not None, (
            f"not resumed within {JAVA_RS_BOUND_S} s: {sorted(java.times())}")
        # nothing skipped: each queue's two messages, from its first offset on
        assert java.offsets() == {q: {0, 1} for q in range(QUEUES)}
        print(f"RemotingServer killed (direct={direct}): the Java 4.9.8 push consumer resumed "
              f"in {took:.2f} s")
    finally:
        java.stop()


def test_whole_broker_restarted_our_push_consumer_resumes_at_once(up: Any) -> None:
    u = up()
    rec = Received()
    c = push_consumer(u, "resume_restart_cg", rec)
    try:
        settle(rec.times, u.port)
        first = u.runs[-1]
        killed_at = time.monotonic()
        killed = first.kill9()
        assert killed and wait_gone(killed, 15.0) == []
        first.proc.wait(10)
        u.start()  # the same ports; the store recovers from its abort marker
        ready_at = time.monotonic()
        after = send_each_queue(u.port, "after-restart", ready_at + RESUME_BOUND_S)
        took = consumed_within(rec.times, after, ready_at, RESUME_BOUND_S)
        assert took is not None, (
            f"not resumed within {RESUME_BOUND_S} s of the restart: {sorted(rec.times())}")
        print(f"whole broker restarted: serving {ready_at - killed_at:.2f} s after the kill, our "
              f"push consumer resumed {took:.2f} s after that")
    finally:
        c.close()
