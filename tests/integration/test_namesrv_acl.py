"""The name server with ACL (issue #23: ours closes what RocketMQ 4.9 leaves open), started as
a user starts it (`actormq up -c` with aclEnable=true, one switch for the host): its write codes
need a signed admin account; reads and the brokers' own registration stay open; ACL cannot be
switched off over the wire; the SparkBridge `up` starts signs its entry with the keys in the
environment, and without them `up` refuses to start (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy import launch
from deploy.wire import BlockingClient
from protocol.acl import sign_ext
from protocol.codes import RequestCode as RC
from protocol.command import RemotingCommand
from protocol.headers import (
    GetKVConfigRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from tests.integration.e2e_helpers import SMALL_STORE, start_up_process, wait_until
from tests.integration.test_acl_broker import ACL, ADMIN_ENV

pytestmark = pytest.mark.integration

@pytest.fixture
def acl_up(tmp_path: Path) -> Iterator[tuple[int, int]]:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    run, ns, port, _data = start_up_process(tmp_path, ADMIN_ENV, aclEnable="true",
                                            rocketmqHome=str(home))  # fmt: skip
    try:
        yield ns, port
    finally:
        run.stop()


def _call(ns: int, cmd: RemotingCommand, keys: tuple[str, str] | None = None) -> RemotingCommand:
    if keys is not None:
        ext = dict(cmd.ext_fields or {})
        sign_ext(ext, cmd.body, keys[0], keys[1])
        cmd.ext_fields = ext
    with BlockingClient(("127.0.0.1", ns)) as c:
        return c.invoke(cmd, 10.0)


def _put_kv(value: str) -> RemotingCommand:
    return RemotingCommand.request(RC.PUT_KV_CONFIG,
                                   PutKVConfigRequestHeader("NS_T", "k", value).to_ext())


def test_name_server_writes_need_an_admin_account(acl_up: tuple[int, int]) -> None:
    ns, port = acl_up
    unsigned = _call(ns, _put_kv("v0"))
    assert unsigned.code == 1 and "No accessKey is configured" in (unsigned.remark or "")
    sub = _call(ns, _put_kv("v1"), ("subscriber1", "subSecret1"))
    assert sub.code == 1 and "Need admin permission for request code=100" in (sub.remark or "")
    forged = _call(ns, _put_kv("v2"), ("adminKey1", "notTheSecret"))
    assert forged.code == 1 and "Check signature failed" in (forged.remark or "")
    assert _call(ns, _put_kv("v3"), ("adminKey1", "adminSecret1")).code == 0
    read = _call(ns, RemotingCommand.request(RC.GET_KV_CONFIG,
                                             GetKVConfigRequestHeader("NS_T", "k").to_ext()))
    assert read.code == 0 and (read.ext_fields or {}).get("value") == "v3"  # reads: unsigned
    # the SparkBridge of `up` put its entry with the admin keys of its environment
    def bridge_entry() -> str | None:
        resp = _call(ns, RemotingCommand.request(RC.GET_KV_CONFIG, GetKVConfigRequestHeader(
            "ACTORMQ_SPARK", "bridgeAddr").to_ext()))  # fmt: skip
        return (resp.ext_fields or {}).get("value") if resp.code == 0 else None

    entry = wait_until(bridge_entry, 30.0)  # the bridge starts after the broker
    assert entry is not None and entry.startswith("127.0.0.1:")
    # the broker registered unsigned (as a 4.9 broker does): its route is served
    cluster = _call(ns, RemotingCommand.request(RC.GET_BROKER_CLUSTER_INFO))
    assert cluster.code == 0 and f"127.0.0.1:{port}".encode() in bytes(cluster.body)
    wipe = RemotingCommand.request(RC.WIPE_WRITE_PERM_OF_BROKER,
                                   WipeWritePermOfBrokerRequestHeader("broker-a").to_ext())
    assert _call(ns, wipe).code == 1
    config_off = RemotingCommand.request(RC.UPDATE_NAMESRV_CONFIG, body=b"aclEnable=false\n")
    refused = _call(ns, config_off, ("adminKey1", "adminSecret1"))
    assert refused.code != 0 and "read at start only" in (refused.remark or "")
    assert _call(ns, _put_kv("v4")).code == 1  # still closed
    # the admin CLI signs its name-server writes with its keys
    def admin(name: str, *keys: str) -> subprocess.CompletedProcess[bytes]:
        argv = [sys.executable, "-m", "deploy", "admin", name, "-n", f"127.0.0.1:{ns}",
                "-b", "broker-a", *keys]  # fmt: skip
        return subprocess.run(argv, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)

    no_keys = admin("wipeWritePerm")
    assert no_keys.returncode == 1 and b"No accessKey is configured" in no_keys.stderr
    keys = ("--access-key", "adminKey1", "--secret-key", "adminSecret1")
    wiped = admin("wipeWritePerm", *keys)
    assert wiped.returncode == 0 and b"wipe write perm of broker[broker-a]" in wiped.stdout, \
        wiped.stderr[-2000:]  # fmt: skip
    assert not wiped.stdout.rstrip().endswith(b" 0")  # the broker's topics lost their write perm
    added = admin("addWritePerm", *keys)
    assert added.returncode == 0 and b"add write perm of broker[broker-a]" in added.stdout


def test_up_with_acl_and_a_bridge_needs_its_keys(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    conf = tmp_path / "b.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in SMALL_STORE.items()) +
                    f"aclEnable=true\nrocketmqHome={home}\n")  # fmt: skip
    argv = [sys.executable, "-m", "deploy", "up", "--data", str(tmp_path / "data"), "-c",
            str(conf), "--namesrv-port", str(launch.stable_free_port()), "--broker-port",
            str(launch.stable_free_port(pair=True)), "--spark-bridge-port", "0"]  # fmt: skip
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("ACTORMQ_")}
    res = subprocess.run(argv, capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                         env=env)  # fmt: skip
    assert res.returncode == 2, res.stderr.decode()[-2000:]
    assert b"ACTORMQ_ACCESS_KEY" in res.stderr and b"--spark-bridge-port -1" in res.stderr
