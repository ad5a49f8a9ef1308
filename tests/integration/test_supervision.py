"""Supervision (issue #12 item 1): every role SIGKILLed in turn is replaced and serves again
within 5 s with nothing acknowledged lost; a role killed again and again stops `actormq up`
with a non-zero exit and no process left behind; the connection cap refuses the excess.

The real broker and name server in one actor system (tests/integration/conftest.py's
`local_cluster`); processes are found by their names (amq-<role>, actors.runtime.watch) among
the cluster's own PIDs and killed by PID.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.supervisor import MAX_DEATHS
from deploy import launch, procinfo
from deploy.cli import EXIT_ROLE_FAILED
from deploy.wire import BlockingClient
from protocol.codes import RequestCode, ResponseCode
from protocol.message import decode_messages
from tests.integration.conftest import MarkedProcess, cluster_pids, up_command, wait_gone
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    SMALL_STORE,
    broker_addr,
    comm,
    create_topic_cmd,
    heartbeat_cmd,
    msg_props,
    namesrv_addr,
    pull_cmd,
    role_pids,
    send_cmd,
    simple_cmd,
    start_real,
    wait_route,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "SupervisedTopic"
QUEUES = 4
PER_ROLE = 20  # messages acknowledged before each kill
SERVE_AGAIN_S = 5.0
BUSY = int(ResponseCode.SYSTEM_BUSY)


def _one(pids: list[int]) -> int | None:
    """The only pid of the list (None when there are none or several)."""
    return pids[0] if len(pids) == 1 else None


class Producer:
    """A blocking client that sends to TOPIC and remembers every acknowledged message."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self.client = BlockingClient(addr)
        self.acked: dict[str, bytes] = {}  # UNIQ_KEY -> body
        self.n = 0

    def send(self, timeout_s: float = RPC_TIMEOUT_S, keys: str | None = None) -> int:
        """One SEND_MESSAGE_V2; its response code (acknowledged ones are remembered)."""
        props = msg_props(tags="sup", keys=keys or f"k{self.n}")
        body = f"supervised-{self.n}".encode()
        self.n += 1
        resp = self.client.invoke(send_cmd(TOPIC, body, props, queue_id=self.n % QUEUES),
                                  timeout_s)  # fmt: skip
        if resp.code == 0:
            self.acked[props["UNIQ_KEY"]] = body
        return resp.code

    def send_acked(self, count: int) -> None:
        """`count` acknowledged sends (a SYSTEM_BUSY is tried again, bounded)."""
        for _ in range(count):
            for _attempt in range(50):
                if self.send() == 0:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("a send was never acknowledged")


def serving_within(probe: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until probe() is true (None: not within timeout_s); errors count as no."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            if probe():
                return time.monotonic() - t0
        except (OSError, TimeoutError, ConnectionError):
            pass
        time.sleep(0.02)
    return None


def _invoke(addr: tuple[str, int], cmd: Any) -> Any:
    with BlockingClient(addr) as cl:
        return cl.invoke(cmd, 2.0)


def _pull_all(addr: tuple[str, int]) -> dict[str, bytes]:
    got: dict[str, bytes] = {}
    with BlockingClient(addr) as cl:
        for qid in range(QUEUES):
            offset = 0
            for _ in range(1000):
                resp = cl.invoke(pull_cmd("sup_cg", TOPIC, qid, offset), RPC_TIMEOUT_S)
                if resp.code != 0:
                    assert resp.code == int(ResponseCode.PULL_NOT_FOUND), (resp.code, resp.remark)
                    break
                for m in decode_messages(bytes(resp.body), check_crc=True):
                    got[m.properties["UNIQ_KEY"]] = m.body
                offset = int(resp.ext_fields["nextBeginOffset"])
    return got


def test_each_role_killed_is_replaced_and_nothing_acknowledged_is_lost(local_cluster) -> None:
    cluster = start_real(local_cluster)
    addr, ns = broker_addr(cluster), namesrv_addr(cluster)
    assert _invoke(addr, create_topic_cmd(TOPIC, QUEUES)).code == 0
    assert wait_route(ns, TOPIC, True, 10.0).code == 0
    producer = Producer(addr)
    last_id: list[str] = []

    def sends() -> bool:
        return producer.send(2.0) == 0

    def pulls() -> bool:
        return _invoke(addr, pull_cmd("sup_cg", TOPIC, 0, 0)).code in (0, 19, 20)

    def offsets() -> bool:
        cmd = simple_cmd(int(RequestCode.QUERY_CONSUMER_OFFSET), consumerGroup="sup_cg",
                         topic=TOPIC, queueId=0)  # fmt: skip
        return bool(_invoke(addr, cmd).code != BUSY)

    def heartbeats() -> bool:
        return bool(_invoke(addr, heartbeat_cmd("sup-client", "sup_cg", {TOPIC: "*"})).code == 0)

    def views() -> bool:  # QUERY_MESSAGE by a key sent after the kill: indexed by whom it may
        key = f"after-{time.monotonic_ns()}"
        if producer.send(2.0, keys=key) != 0:
            return False
        last_id[:] = [key]
        cmd = simple_cmd(int(RequestCode.QUERY_MESSAGE), topic=TOPIC, key=key, maxNum=4,
                         beginTimestamp=0, endTimestamp=2**62)  # fmt: skip
        resp = _invoke(addr, cmd)
        return bool(resp.code == 0 and resp.body)

    def admin() -> bool:
        return bool(_invoke(addr, simple_cmd(int(RequestCode.GET_BROKER_RUNTIME_INFO))).code == 0)

    def long_polls() -> bool:  # a held pull answered by a message sent after it was held
        with BlockingClient(addr) as cl:
            end = cl.invoke(simple_cmd(int(RequestCode.GET_MAX_OFFSET), topic=TOPIC, queueId=1),
                            2.0).ext_fields["offset"]  # fmt: skip
            pull = pull_cmd("sup_cg", TOPIC, 1, int(end), sys_flag=2 | 4, suspend_ms=3000)
            cl.send(pull)
            time.sleep(0.2)  # held by then, usually (a pull not yet held reads the message)
            with BlockingClient(addr) as sender:
                code = sender.invoke(send_cmd(TOPIC, b"wake", msg_props(), queue_id=1), 2.0).code
            resp = cl.wait_response(pull.opaque, 2.5)
        return code == 0 and resp.code == 0 and bool(resp.body)

    def delay_offsets() -> bool:  # routed to the ScheduleMessageService
        return bool(_invoke(addr, simple_cmd(int(RequestCode.GET_ALL_DELAY_OFFSET))).code == 0)

    def ha_listens() -> bool:
        return bool(procinfo.listeners_of(role_pids(cluster_pids(cluster), "HAServiceActor")))

    def routes() -> bool:
        return bool(_invoke(ns, simple_cmd(int(RequestCode.GET_ROUTEINFO_BY_TOPIC),
                                           topic=TOPIC)).code == 0)  # fmt: skip

    roles: list[tuple[str, Callable[[], bool]]] = [
        ("RemotingServer", sends), ("send", sends), ("pull", pulls),
        ("consumer_manage", offsets), ("client_manage", heartbeats), ("query", views),
        ("admin", admin), ("IndexServiceActor", views), ("HAServiceActor", ha_listens),
        ("hold", long_polls), ("schedule", delay_offsets), ("txcheck", sends),
        ("BrokerControllerActor", sends), ("NameServerActor", routes),
    ]
    took: dict[str, float] = {}
    for role, probe in roles:
        producer.send_acked(PER_ROLE)
        producer.client.close()
        old = wait_until(lambda role=role: _one(role_pids(cluster_pids(cluster), role)), 5.0,
                         0.05)  # fmt: skip
        assert old, f"not one {role} process: {role_pids(cluster_pids(cluster), role)}"
        os.kill(old, signal.SIGKILL)
        assert wait_gone([old], 5.0) == [], role

        def replaced(role: str = role, old: int = old, probe: Any = probe) -> bool:
            fresh = role_pids(cluster_pids(cluster), role)
            return bool(fresh) and old not in fresh and probe()

        elapsed = serving_within(replaced, SERVE_AGAIN_S)
        assert elapsed is not None, f"{role} not serving again within {SERVE_AGAIN_S} s"
        took[role] = elapsed
    producer.send_acked(PER_ROLE)
    log_text = (Path(cluster.data_dir) / "actormq.log").read_text(errors="replace")
    for role in ("RemotingServer", "send", "HAService", "hold", "schedule", "txcheck",
                 "broker-a", "namesrv"):
        assert f"role={role} pid=" in log_text and "killed by SIGKILL" in log_text, role
    got = _pull_all(addr)
    lost = [k for k in producer.acked if k not in got]
    assert not lost, f"{len(lost)}/{len(producer.acked)} acknowledged messages lost"
    assert all(got[k] == body for k, body in producer.acked.items())
    print("replacement, kill to serving again (s):",
          {r: round(t, 3) for r, t in took.items()})


def test_connection_cap_refuses_the_excess_and_says_so_once(local_cluster) -> None:
    cluster = start_real(local_cluster, maxConnections="20")
    addr = broker_addr(cluster)
    held = [socket.create_connection(addr, timeout=5.0) for _ in range(20)]
    try:
        time.sleep(0.3)  # every one accepted
        refused = []
        for _ in range(5):
            s = socket.create_connection(addr, timeout=5.0)
            s.settimeout(5.0)
            try:
                refused.append(s.recv(1) == b"")  # closed by the server at once
            except ConnectionResetError:
                refused.append(True)
            finally:
                s.close()
        assert refused == [True] * 5
        with BlockingClient(addr) as probe, pytest.raises((ConnectionError, OSError)):
            probe.invoke(simple_cmd(int(RequestCode.GET_BROKER_RUNTIME_INFO)), 3.0)  # still full
        held.pop().close()
        assert wait_until(lambda: _admin_ok(addr), 5.0, 0.1), "a freed slot was not reusable"
        # the held ones still work
        held[0].sendall(simple_cmd(int(RequestCode.GET_BROKER_RUNTIME_INFO)).encode())
        held[0].settimeout(5.0)
        assert len(held[0].recv(4)) == 4
    finally:
        for s in held:
            s.close()
    text = (Path(cluster.data_dir) / "actormq.log").read_text(errors="replace")
    lines = [ln for ln in text.splitlines() if "maxConnections=20 reached" in ln]
    assert len(lines) == 1, lines  # rate-limited: one line for the 6 refusals
    assert "refused 1 connection(s)" in lines[0]


def _admin_ok(addr: tuple[str, int]) -> bool:
    try:
        return bool(_invoke(addr, simple_cmd(int(RequestCode.GET_BROKER_RUNTIME_INFO))).code == 0)
    except (OSError, ConnectionError, TimeoutError):
        return False


@pytest.mark.parametrize(("role", "named", "echo"), [
    ("RemotingServer", "RemotingServer", True),
    ("send", "send", False),  # the store writer of the real broker
    ("BrokerControllerActor", "broker-a", True),
    ("NameServerActor", "namesrv", True),
])  # fmt: skip
def test_role_killed_repeatedly_stops_up_nonzero_leaving_nothing(
    tmp_path: Path, role: str, named: str, echo: bool
) -> None:
    conf = tmp_path / "broker.conf"  # small store files: the real writer recovers them fast
    conf.write_text("".join(f"{k}={v}\n" for k, v in SMALL_STORE.items()))
    ns_port = launch.stable_free_port()
    port = launch.stable_free_port(pair=True, avoid={ns_port, ns_port - 1})  # HA: port + 1
    cmd = [*up_command(echo), "--data", str(tmp_path / "data"), "-c", str(conf),
           "--namesrv-port", str(ns_port), "--broker-port", str(port),
           "--spark-bridge-port", "0"]  # fmt: skip
    up = MarkedProcess(cmd, tmp_path / "up", os.getcwd())
    try:
        up.wait_for("broker ", 60.0)
        _kill_until_given_up(up, role, named)
    finally:
        up.stop()


def _kill_until_given_up(up: MarkedProcess, role: str, named: str) -> None:
    killed: list[int] = []
    for i in range(MAX_DEATHS):
        pids = wait_until(lambda: [p for p in role_pids(up.pids(), role)
                                   if p not in killed], 15.0, 0.02)  # fmt: skip
        assert pids, f"no {role} after {i} kills"
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])
    code = up.proc.wait(30)
    assert code == EXIT_ROLE_FAILED
    err = up.err_path.read_text(errors="replace")
    assert f"{named} keeps failing" in err, err[-2000:]
    left = wait_gone(up.pids(), 30.0)
    assert left == [], [(p, comm(p)) for p in left]
    log_text = (up.out_path.parent / "data" / "actormq.log").read_text(errors="replace")
    assert f"death {MAX_DEATHS - 1} of {MAX_DEATHS}" in log_text
    assert "did not confirm shutdown" not in err  # stopped itself, then answered the stop
    assert "keeps failing" in log_text
