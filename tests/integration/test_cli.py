"""`actormq` as a user runs it: up + SIGTERM leaves no process; bad config exits 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deploy.wire import BlockingClient
from protocol.command import RemotingCommand
from tests.integration.conftest import wait_gone

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
    assert up.stop() == 0
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
     ("brokerId=x1", "brokerId")],
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
