"""`./bin/actormq` run from another directory (issue #12, defects 5 and 6): relative paths in
options and config files are taken from where the user stands, `up` keeps ./data there, and
UPDATE_BROKER_CONFIG of a start-time setting is kept in the broker's config file, which the next
start reads (RocketMQ's BrokerStartup: the -c file is the one Configuration persists to)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deploy import launch
from deploy.wire import BlockingClient
from protocol.command import RemotingCommand
from tests.integration.conftest import MarkedProcess
from tests.integration.e2e_helpers import RPC_TIMEOUT_S, SMALL_STORE, msg_props, send_cmd

pytestmark = pytest.mark.integration

ACTORMQ = str(Path(__file__).resolve().parents[2] / "bin" / "actormq")


def _admin(cwd: Path, ns: int, *args: str) -> str:
    """`actormq admin <command> -n 127.0.0.1:<ns> ...` in `cwd`; its output (it must succeed).
    The tool wants a name server even for a command sent to one broker (-b), which does not
    contact it."""
    argv = [sys.executable, "-m", "deploy", "admin", args[0], "-n", f"127.0.0.1:{ns}", *args[1:]]
    res = subprocess.run(argv, cwd=cwd,
                         capture_output=True, stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    return res.stdout.decode()


def _broker_config(port: int) -> dict[str, str]:
    """GET_BROKER_CONFIG (26) as a dict."""
    with BlockingClient(("127.0.0.1", port)) as cl:
        r = cl.invoke(RemotingCommand.request(26), RPC_TIMEOUT_S)
    assert r.code == 0
    return dict(line.split("=", 1) for line in bytes(r.body).decode().splitlines() if "=" in line)


def _start(argv: list[str], out: Path, cwd: Path, port: int) -> MarkedProcess:
    run = MarkedProcess(argv, out, str(cwd))
    try:
        run.wait_for(f"listening on 127.0.0.1:{port} (", 60.0)
    except BaseException:
        run.stop()
        raise
    return run


def test_broker_conf_with_relative_paths_and_an_update_kept_for_the_next_start(tmp_path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first, second = launch.stable_free_port(pair=True), launch.stable_free_port(pair=True)
    conf = work / "broker.conf"
    conf.write_text("# broker-rel: written by hand, kept by updateBrokerConfig\n"
                    f"brokerName=broker-rel\nlistenPort={first}\n"
                    "storePathRootDir=./store-rel\nstorePathCommitLog=./commitlog-rel\n"
                    "flushDiskType=ASYNC_FLUSH\n"
                    + "".join(f"{k}={v}\n" for k, v in SMALL_STORE.items()))  # fmt: skip
    argv = [ACTORMQ, "broker", "-c", "broker.conf"]  # relative, from `work`
    run = _start(argv, tmp_path / "b1", work, first)
    try:
        assert (work / "store-rel" / "lock").is_file() and (work / "logs" / "actormq.log").is_file()
        assert "0" * 20 in [f.name for f in (work / "commitlog-rel").iterdir()]
        for key, value in (("listenPort", str(second)), ("flushDiskType", "SYNC_FLUSH")):
            out = _admin(work, launch.stable_free_port(), "updateBrokerConfig",
                         "-b", f"127.0.0.1:{first}", "-k", key, "-v", value)
            assert f"{key} take effect at the next start (saved to {conf})" in out
        now = _broker_config(first)  # what is true until the restart
        assert (now["listenPort"], now["flushDiskType"]) == (str(first), "ASYNC_FLUSH")
    finally:
        assert run.stop() == 0
    text = conf.read_text()
    assert text.startswith("# broker-rel: written by hand, kept by updateBrokerConfig\n")
    assert f"listenPort={second}\n" in text and f"listenPort={first}\n" not in text
    assert "flushDiskType=SYNC_FLUSH\n" in text
    run = _start(argv, tmp_path / "b2", work, second)
    try:
        now = _broker_config(second)
        assert (now["listenPort"], now["flushDiskType"]) == (str(second), "SYNC_FLUSH")
        assert now["storePathRootDir"] == str(work / "store-rel")
        with BlockingClient(("127.0.0.1", second)) as cl:
            r = cl.invoke(send_cmd("RelT", b"synced", msg_props()), RPC_TIMEOUT_S)
            assert r.code == 0, r.remark
    finally:
        assert run.stop() == 0


def test_up_keeps_data_where_the_user_stands_and_reads_its_config_file(tmp_path) -> None:
    """`up` without -c in another directory: ./data is made there; the broker's config file is
    ./data/store/config/broker.properties (here seeded as an earlier updateBrokerConfig would
    leave it), read at start and written by updateBrokerConfig."""
    work = tmp_path / "elsewhere"
    saved = work / "data" / "store" / "config" / "broker.properties"
    saved.parent.mkdir(parents=True)
    ns = launch.stable_free_port()
    first, second = launch.stable_free_port(pair=True), launch.stable_free_port(pair=True)
    small = "".join(f"{k}={v}\n" for k, v in SMALL_STORE.items())
    saved.write_text(f"listenPort={first}\n{small}")
    argv = [ACTORMQ, "up", "--namesrv-port", str(ns), "--spark-bridge-port", "0"]
    run = _start(argv, tmp_path / "up1", work, first)
    try:
        assert f"store {work / 'data' / 'store'}, logs {work / 'data'})" in run.out_path.read_text()
        assert (work / "data" / "actormq.log").is_file()
        assert (work / "data" / "store" / "commitlog").is_dir()
        out = _admin(work, ns, "updateBrokerConfig", "-b", f"127.0.0.1:{first}",
                     "-k", "listenPort", "-v", str(second))
        assert f"(saved to {saved})" in out
    finally:
        assert run.stop() == 0
    run = _start(argv, tmp_path / "up2", work, second)
    assert run.stop() == 0


def test_namesrv_config_paths_are_taken_from_the_working_directory(tmp_path) -> None:
    work = tmp_path / "ns"
    work.mkdir()
    port = launch.stable_free_port()
    (work / "namesrv.properties").write_text(
        f"listenPort={port}\nkvConfigPath=./kv/kvConfig.json\n")
    argv = [ACTORMQ, "namesrv", "-c", "namesrv.properties", "--data", "ns-data"]
    run = MarkedProcess(argv, tmp_path / "ns", str(work))
    try:
        run.wait_for(f"name server listening on 127.0.0.1:{port}", 60.0)
        kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:8"}
        with BlockingClient(("127.0.0.1", port)) as cl:
            assert cl.invoke(RemotingCommand.request(100, kv), RPC_TIMEOUT_S).code == 0
            upd = RemotingCommand.request(318, None, b"productEnvName=staging\n")
            assert cl.invoke(upd, RPC_TIMEOUT_S).code == 0
    finally:
        assert run.stop() == 0
    assert "broker-a:8" in (work / "kv" / "kvConfig.json").read_text()
    assert "productEnvName=staging" in (work / "ns-data" / "namesrv" / "namesrv.properties"
                                        ).read_text()  # fmt: skip
    assert os.path.isfile(work / "ns-data" / "actormq.log")
