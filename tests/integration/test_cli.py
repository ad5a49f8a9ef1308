"""`actormq` as a user runs it: up + SIGTERM leaves no process; bad config exits 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from deploy import launch
from deploy.wire import BlockingClient
from protocol.command import RemotingCommand
from tests.integration.conftest import MarkedProcess, wait_gone

pytestmark = pytest.mark.integration


def test_up_serves_then_sigterm_leaves_no_process(up_process) -> None:
    up = up_process()
    up.wait_ready()
    pids = up.pids()
    assert len(pids) >= 5  # launcher, admin, logger, controller, processors, remoting, namesrv
    with BlockingClient(("127.0.0.1", up.broker_port)) as cl:
        assert cl.invoke(RemotingCommand.request(310, None, b"hi"), 10).code == 0
    out = up.out_path.read_text()
    assert f"name server listening on 127.0.0.1:{up.ns_port}" in out
    assert f"listening on 127.0.0.1:{up.broker_port}" in out
    assert up.stop() == 0, up.err_path.read_text(errors="replace")[-3000:]
    assert wait_gone(pids, 15.0) == []
    assert up.pids() == []


def _run_cli(args: list[str], tmp_path) -> tuple[int, str]:
    err_path = tmp_path / "err.txt"
    with open(err_path, "wb") as err:
        rc = subprocess.run([sys.executable, "-m", "deploy", *args], stdout=subprocess.DEVNULL,
                            stderr=err, stdin=subprocess.DEVNULL, timeout=60).returncode
    return rc, err_path.read_text()


def test_broker_missing_config_file_exits_2(tmp_path) -> None:
    rc, err = _run_cli(["broker", "-c", str(tmp_path / "nope.conf")], tmp_path)
    assert rc == 2
    assert "bad configuration" in err and "nope.conf" in err


@pytest.mark.parametrize(
    ("line", "key"),
    [("listenPort=abc", "listenPort"), ("listenPort=70000", "listenPort"),
     ("autoCreateTopicEnable=maybe", "autoCreateTopicEnable"),
     ("brokerId=x1", "brokerId"), ("brokerRole=SLAVE", "brokerId"),
     ("aclEnable=true", "aclEnable"), ("enableDLegerCommitLog=true", "DLedger")],
)
def test_broker_bad_values_exit_2(tmp_path, line: str, key: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerClusterName=DefaultCluster\nbrokerName=broker-a\n{line}\n")
    rc, err = _run_cli(["broker", "-c", str(conf)], tmp_path)
    assert rc == 2
    assert key in err


def test_bad_port_option_exits_2(tmp_path) -> None:
    rc, err = _run_cli(["up", "--broker-port", "99999"], tmp_path)
    assert rc == 2
    assert "port" in err


def test_namesrv_reads_its_config_file_and_serves_it(tmp_path) -> None:
    """`actormq namesrv -c namesrv.properties`: the file's values are what GET_NAMESRV_CONFIG
    answers, UPDATE_NAMESRV_CONFIG persists to configStorePath, and the KV config written
    through it is there after a restart."""
    port = launch.stable_free_port()
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"orderMessageEnable=true\nlistenPort={port}\n")
    data = tmp_path / "ns-data"
    argv = [sys.executable, "-m", "deploy", "namesrv", "-c", str(conf), "--data", str(data)]
    kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:8"}
    for round_ in range(2):
        ns = MarkedProcess(argv, tmp_path / f"ns{round_}", os.getcwd())
        try:
            ns.wait_for(f"name server listening on 127.0.0.1:{port}", 60.0)
            with BlockingClient(("127.0.0.1", port)) as cl:
                r = cl.invoke(RemotingCommand.request(319), 10.0)
                assert r.code == 0 and b"orderMessageEnable=true\n" in bytes(r.body)
                if round_ == 0:
                    assert cl.invoke(RemotingCommand.request(100, kv), 10.0).code == 0
                    upd = RemotingCommand.request(318, None, b"productEnvName=staging\n")
                    assert cl.invoke(upd, 10.0).code == 0
                else:
                    got = cl.invoke(RemotingCommand.request(101, {k: kv[k] for k in
                                                                  ("namespace", "key")}), 10.0)
                    assert got.ext_fields["value"] == "broker-a:8"
        finally:
            assert ns.stop() == 0
    stored = (data / "namesrv" / "namesrv.properties").read_text()
    assert "productEnvName=staging\n" in stored


def test_namesrv_bad_config_exits_2(tmp_path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("orderMessageEnable=perhaps\n")
    rc, err = _run_cli(["namesrv", "-c", str(conf)], tmp_path)
    assert rc == 2
    assert "orderMessageEnable" in err


@pytest.mark.parametrize("which", ["broker", "namesrv", "vip"])
def test_up_port_in_use_exits_2_and_leaves_no_process(tmp_path, which: str) -> None:
    """Another server (a Java broker, say) already on the port: a clear message, exit 2, and
    the actor system it started is gone. The broker's VIP port (listenPort - 2) too, as a Java
    broker refuses to start without it."""
    # every port from below the ephemeral range (stable_free_port): a port-0 socket of any
    # process (this run's own actor system included) never lands on one between pick and use
    free = launch.stable_free_port()
    broker = launch.stable_free_port(pair=True)  # broker - 2 free too, for the VIP case
    port = {"broker": broker, "namesrv": launch.stable_free_port(), "vip": broker - 2}[which]
    taken = socket.socket()
    taken.bind(("127.0.0.1", port))
    taken.listen(1)
    if which == "namesrv":
        ports = ["--broker-port", str(broker), "--namesrv-port", str(port)]
    else:
        ports = ["--broker-port", str(broker), "--namesrv-port", str(free)]
    run = MarkedProcess([sys.executable, "-m", "deploy", "up", "--data", str(tmp_path / "d"),
                         "--spark-bridge-port", "0", *ports], tmp_path / "up",
                        cwd=os.getcwd())  # fmt: skip
    try:
        rc = run.proc.wait(timeout=60)
        err = run.err_path.read_text()
        assert rc == 2, err[-2000:]
        assert f"cannot start: {'name server' if which == 'namesrv' else 'broker'}" in err
        assert f"127.0.0.1:{port}" in err and "Address already in use" in err
        assert "Traceback" not in err
        assert wait_gone(run.pids(), 15.0) == []
    finally:
        run.stop()
        taken.close()


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nobody can write to: a read-only tmpfs when we are root (root ignores mode
    bits), mode 0555 otherwise; unmounted afterwards."""
    path = tmp_path / "ro"
    path.mkdir()
    mounted = False
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)],
                       check=True, timeout=30, stdin=subprocess.DEVNULL)  # fmt: skip
        mounted = True
    else:
        path.chmod(0o555)
    try:
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], check=True, timeout=30,
                           stdin=subprocess.DEVNULL)  # fmt: skip
        else:
            path.chmod(0o755)


def _start_refused(argv: list[str], tmp_path) -> str:
    """Run `actormq <argv>` (it must refuse to start): its stderr; exit 2, no traceback, and
    no process of it left."""
    run = MarkedProcess([sys.executable, "-m", "deploy", *argv], tmp_path / "refused",
                        cwd=str(tmp_path))  # fmt: skip
    try:
        rc = run.proc.wait(timeout=60)
        err = run.err_path.read_text()
        assert rc == 2, err[-2000:]
        assert "Traceback" not in err, err[-2000:]
        assert wait_gone(run.pids(), 15.0) == []
        return err
    finally:
        run.stop()


def test_up_with_a_read_only_data_directory_exits_2(read_only_dir, tmp_path) -> None:
    err = _start_refused(["up", "--data", str(read_only_dir), "--spark-bridge-port", "-1"],
                         tmp_path)  # fmt: skip
    assert f"cannot start: the data directory {read_only_dir} is not writable" in err, err


@pytest.mark.parametrize("where", ["data", "store", "commitlog"])
def test_a_file_where_a_directory_belongs_exits_2(tmp_path, where: str) -> None:
    """--data, storePathRootDir or storePathCommitLog naming a file: the message names the
    path and says what is wrong with it."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory\n")
    conf = tmp_path / "broker.conf"
    conf.write_text({"data": "", "store": f"storePathRootDir={a_file}\n",
                     "commitlog": f"storePathCommitLog={a_file}\n"}[where])
    data = a_file if where == "data" else tmp_path / "data"
    err = _start_refused(["up", "--data", str(data), "-c", str(conf),
                          "--spark-bridge-port", "-1"], tmp_path)  # fmt: skip
    what = {"data": "the data directory", "store": "the store directory (storePathRootDir)",
            "commitlog": "the commit log directory (storePathCommitLog)"}[where]
    assert f"cannot start: {what} {a_file} is not a directory" in err, err
    assert a_file.read_text() == "not a directory\n"


def test_broker_with_a_store_path_under_a_file_exits_2(tmp_path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerClusterName=DefaultCluster\nbrokerName=broker-a\n"
                    f"listenPort={launch.stable_free_port(pair=True)}\n"
                    f"storePathRootDir={a_file}/store\n")  # fmt: skip
    err = _start_refused(["broker", "-c", str(conf)], tmp_path)
    assert f"cannot create the store directory (storePathRootDir) {a_file}/store: Not a " \
           "directory" in err, err
