"""Two "hosts" made of network namespaces joined by a veth pair: `actormq namesrv` on one,
`actormq broker -c broker.conf` on the other, clients on the first (our admin tool and the
unmodified librocketmq 2.1.0 client). The broker registers across the link with its brokerIP1,
clients route to it by the name server's answer, and only the configured addresses listen.

The test creates and removes its namespaces itself; it is skipped, with the reason, where
`ip netns` is not permitted (not root, no iproute2, no namespace support).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy import procinfo
from tests.integration.conftest import MarkedProcess
from tests.integration.e2e_helpers import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CLIENTS = REPO / "tests" / "clients"
NS_IP, BROKER_IP = "10.199.0.1", "10.199.0.2"


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)


@pytest.fixture
def two_hosts() -> Iterator[tuple[str, str]]:
    """(namesrv host netns, broker host netns), linked by a veth pair; removed afterwards."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("multi-host test needs root and iproute2 to create network namespaces")
    tag = uuid.uuid4().hex[:6]
    a, b = f"amq-a-{tag}", f"amq-b-{tag}"
    va, vb = f"va{tag}", f"vb{tag}"
    made: list[str] = []
    try:
        for ns in (a, b):
            r = _ip("netns", "add", ns)
            if r.returncode != 0:
                pytest.skip(f"network namespaces not permitted here: {r.stderr.strip()}")
            made.append(ns)
        steps = [
            ("link", "add", va, "type", "veth", "peer", "name", vb),
            ("link", "set", va, "netns", a),
            ("link", "set", vb, "netns", b),
            ("-n", a, "addr", "add", f"{NS_IP}/24", "dev", va),
            ("-n", b, "addr", "add", f"{BROKER_IP}/24", "dev", vb),
            ("-n", a, "link", "set", va, "up"),
            ("-n", b, "link", "set", vb, "up"),
            ("-n", a, "link", "set", "lo", "up"),
            ("-n", b, "link", "set", "lo", "up"),
        ]
        for step in steps:
            r = _ip(*step)
            if r.returncode != 0:
                pytest.skip(f"cannot wire the namespaces ({' '.join(step)}): {r.stderr.strip()}")
        yield a, b
    finally:
        for ns in made:
            _ip("netns", "del", ns)  # removes the veth pair with it


class _Proc(MarkedProcess):
    """A command run inside a network namespace."""

    def __init__(self, ns: str, argv: list[str], out: Path, env: dict[str, str] | None = None):
        super().__init__(["ip", "netns", "exec", ns, *argv], out, str(REPO), env)


def _run(ns: str, argv: list[str], timeout_s: float = 60.0, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                          timeout=timeout_s, cwd=REPO, env=dict(os.environ, **(env or {})))


def test_namesrv_and_broker_on_two_hosts(two_hosts: tuple[str, str], tmp_path: Path) -> None:
    ns_a, ns_b = two_hosts
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=DefaultCluster\nbrokerName=broker-mh\nbrokerId=0\n"
        f"brokerIP1={BROKER_IP}\nnamesrvAddr={NS_IP}:9876\nlistenPort=10911\n"
        f"storePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog=4194304\n"
    )
    py = sys.executable
    namesrv = _Proc(ns_a, [py, "-m", "deploy", "namesrv", "-p", "9876", "--host", NS_IP,
                           "--data", str(tmp_path / "ns")], tmp_path / "namesrv")  # fmt: skip
    broker = None
    try:
        namesrv.wait_for(f"name server listening on {NS_IP}:9876")
        broker = _Proc(ns_b, [py, "-m", "deploy", "broker", "-c", str(conf), "--host", BROKER_IP],
                       tmp_path / "broker")  # fmt: skip
        broker.wait_for(f"listening on {BROKER_IP}:10911")
        admin = [py, "-m", "deploy", "admin"]
        deadline = time.monotonic() + 30
        out = ""
        while time.monotonic() < deadline:  # the first registration crosses the link
            out = _run(ns_a, [*admin, "clusterList", "-n", f"{NS_IP}:9876"]).stdout
            if f"{BROKER_IP}:10911" in out:
                break
            time.sleep(0.3)
        assert "broker-mh" in out and f"{BROKER_IP}:10911" in out, out
        r = _run(ns_a, [*admin, "sendMessage", "-n", f"{NS_IP}:9876", "-t", "MultiHost",
                        "-p", "across-the-link", "--keys", "mh-1"])  # fmt: skip
        assert r.returncode == 0 and "SEND_OK" in r.stdout, r.stderr
        r = _run(ns_a, [*admin, "consumeMessage", "-n", f"{NS_IP}:9876", "-t", "MultiHost",
                        "-g", "MhCG", "--from-start"])  # fmt: skip
        assert r.returncode == 0 and "across-the-link" in r.stdout, (r.stdout, r.stderr)

        cpp = CLIENTS / ".venv-cpp2" / "bin" / "python"
        if cpp.exists():  # the unmodified C++ client core, from the name server's host
            r = _run(ns_a, [str(cpp), str(CLIENTS / "cpp_roundtrip.py"), f"{NS_IP}:9876",
                            "MultiHostCpp", "10", "*", "40"], timeout_s=90,
                     env={"HOME": str(tmp_path)})  # fmt: skip
            events = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
            sent = [e for e in events if e["event"] == "sent" and e["status"] == 0]
            got = {e["body"] for e in events if e["event"] == "received"}
            assert len(sent) == 10 and got == {f"body-{i}" for i in range(10)}, r.stderr[-2000:]

        # only what was asked listens beyond loopback on the broker's host
        pids = broker.pids()
        exposed = {(ip, port) for _pid, ip, port in procinfo.listeners_of(pids, pids[0])
                   if not ip.startswith("127.")}  # fmt: skip
        # the client port, the VIP port (10909) and the master's HA port (10912), as RocketMQ
        assert exposed == {(BROKER_IP, 10911), (BROKER_IP, 10909), (BROKER_IP, 10912)}, exposed
    finally:
        if broker is not None:
            broker.stop()
        namesrv.stop()


_MAX_OFFSETS = """
import sys
from deploy.wire import BlockingClient
from protocol.command import RemotingCommand
total = 0
with BlockingClient((sys.argv[1], int(sys.argv[2]))) as cl:
    for q in range(int(sys.argv[4])):
        r = cl.invoke(RemotingCommand.request(30, {"topic": sys.argv[3], "queueId": str(q)}), 10)
        total += int((r.ext_fields or {}).get("offset", 0)) if r.code == 0 else 0
print(total)
"""


def test_master_and_slave_on_two_hosts(two_hosts: tuple[str, str], tmp_path: Path) -> None:
    """A master on one host, its slave on the other: the slave learns the master's HA address
    from the name server and replicates across the link; both show in the cluster."""
    ns_a, ns_b = two_hosts
    common = ("brokerClusterName=DefaultCluster\nbrokerName=broker-ha\n"
              f"namesrvAddr={NS_IP}:9876\nmappedFileSizeCommitLog=4194304\n")  # fmt: skip
    master_conf, slave_conf = tmp_path / "master.conf", tmp_path / "slave.conf"
    master_conf.write_text(common + f"brokerIP1={BROKER_IP}\nlistenPort=10911\n"
                           f"storePathRootDir={tmp_path / 'master-store'}\n")  # fmt: skip
    slave_conf.write_text(common + f"brokerId=1\nbrokerRole=SLAVE\nbrokerIP1={NS_IP}\n"
                          f"listenPort=10921\nstorePathRootDir={tmp_path / 'slave-store'}\n")
    py = sys.executable
    procs: list[_Proc] = []
    try:
        procs.append(_Proc(ns_a, [py, "-m", "deploy", "namesrv", "-p", "9876", "--host", NS_IP,
                                  "--data", str(tmp_path / "ns")], tmp_path / "namesrv"))
        procs[-1].wait_for(f"name server listening on {NS_IP}:9876")
        procs.append(_Proc(ns_b, [py, "-m", "deploy", "broker", "-c", str(master_conf),
                                  "--host", BROKER_IP], tmp_path / "master"))  # fmt: skip
        procs[-1].wait_for(f"listening on {BROKER_IP}:10911")
        admin = [py, "-m", "deploy", "admin"]
        registered = wait_until(lambda: f"{BROKER_IP}:10911" in _run(
            ns_a, [*admin, "clusterList", "-n", f"{NS_IP}:9876"]).stdout or None, 30.0, 0.3)
        assert registered, "the master never showed in clusterList"
        r = _run(ns_a, [*admin, "updateTopic", "-n", f"{NS_IP}:9876", "-c", "DefaultCluster",
                        "-t", "HaAcross", "-r", "2", "-w", "2"])  # fmt: skip
        assert r.returncode == 0, r.stderr
        for i in range(20):
            r = _run(ns_a, [*admin, "sendMessage", "-n", f"{NS_IP}:9876", "-t", "HaAcross",
                            "-p", f"m{i}"])  # fmt: skip
            assert r.returncode == 0 and "SEND_OK" in r.stdout, r.stderr
        procs.append(_Proc(ns_a, [py, "-m", "deploy", "broker", "-c", str(slave_conf),
                                  "--host", NS_IP], tmp_path / "slave"))  # fmt: skip
        procs[-1].wait_for(f"listening on {NS_IP}:10921")
        def offsets() -> str:
            return _run(ns_a, [py, "-c", _MAX_OFFSETS, NS_IP, "10921", "HaAcross", "2"]).stdout

        got = wait_until(lambda: offsets().strip() == "20" or None, 40.0, 0.5)  # over :10912
        assert got, (offsets(), procs[-1].err_path.read_text()[-2000:])
        out = _run(ns_a, [*admin, "clusterList", "-n", f"{NS_IP}:9876"]).stdout
        assert f"{BROKER_IP}:10911" in out and f"{NS_IP}:10921" in out, out
    finally:
        for p in reversed(procs):
            p.stop()
