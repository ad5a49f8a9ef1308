"""A broker with aclEnable=true (issue #23 part 1), started as a user starts it (`actormq up -c`),
checked with the real Java 4.9.8 producer signing through AclClientRPCHook and with raw signed
requests: good keys pass; a wrong secret, a missing key, an unsigned request and a tampered
body are refused with SYSTEM_ERROR and RocketMQ's messages; a SUB-only account cannot send;
an admin code needs an admin account; a white-listed address needs no signature; an edit of
plain_acl.yml takes effect while the broker runs; a bad file refuses the start (exit 2)."""

from __future__ import annotations

import os
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
from tests.integration.e2e_helpers import (
    SMALL_STORE,
    create_topic_cmd,
    msg_props,
    send_cmd,
    start_up_process,
    wait_until,
)

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
TOPIC = "AclT"
ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*

accounts:
  - accessKey: adminKey1
    secretKey: adminSecret1
    admin: true

  - accessKey: subscriber1
    secretKey: subSecret1
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


# the SparkBridge `up` starts signs its name-server entry with these (an admin account)
ADMIN_ENV = {"ACTORMQ_ACCESS_KEY": "adminKey1", "ACTORMQ_SECRET_KEY": "adminSecret1"}


def _signed(cmd: RemotingCommand, ak: str, sk: str) -> RemotingCommand:
    ext = dict(cmd.ext_fields or {})
    sign_ext(ext, cmd.body, ak, sk)
    cmd.ext_fields = ext
    return cmd


@pytest.fixture
def acl_up(tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    run, ns, port, _data = start_up_process(tmp_path, ADMIN_ENV, aclEnable="true",
                                            rocketmqHome=str(home))  # fmt: skip
    try:
        yield ns, port, home
    finally:
        run.stop()


def _call(port: int, cmd: RemotingCommand) -> RemotingCommand:
    with BlockingClient(("127.0.0.1", port)) as c:
        return c.invoke(cmd, 10.0)


def test_raw_requests_are_checked_as_rocketmq_checks_them(acl_up: tuple[int, int, Path]) -> None:
    _ns, port, home = acl_up
    r = _call(port, create_topic_cmd(TOPIC, 4))
    assert (r.code, r.remark) == (1, "org.apache.rocketmq.acl.common.AclException: "
                                     "No accessKey is configured")  # fmt: skip
    r = _call(port, _signed(create_topic_cmd(TOPIC, 4), "subscriber1", "subSecret1"))
    assert r.code == 1 and "Need admin permission for request code=17" in (r.remark or "")
    r = _call(port, _signed(create_topic_cmd(TOPIC, 4), "adminKey1", "wrongSecret"))
    assert r.code == 1 and "Check signature failed for accessKey=adminKey1" in (r.remark or "")
    assert _call(port, _signed(create_topic_cmd(TOPIC, 4), "adminKey1", "adminSecret1")).code == 0

    send = _signed(send_cmd(TOPIC, b"hello", msg_props()), "adminKey1", "adminSecret1")
    assert _call(port, send).code == 0
    tampered = _signed(send_cmd(TOPIC, b"hello", msg_props()), "adminKey1", "adminSecret1")
    tampered.body = b"jello"
    r = _call(port, tampered)
    assert r.code == 1 and "Check signature failed" in (r.remark or "")
    r = _call(port, _signed(send_cmd(TOPIC, b"x", msg_props()), "subscriber1", "subSecret1"))
    assert r.code == 1 and f"No default permission for topic:{TOPIC}" in (r.remark or "")

    # an edit while it runs: the subscriber may publish from now on
    path = home / "conf" / "plain_acl.yml"
    path.write_text(ACL.replace("defaultTopicPerm: SUB", "defaultTopicPerm: PUB|SUB"))
    os.utime(path, ns=(10**18, 10**18))

    def published() -> bool:
        cmd = _signed(send_cmd(TOPIC, b"x", msg_props()), "subscriber1", "subSecret1")
        return _call(port, cmd).code == 0

    assert wait_until(published, 10.0), "the edited file never took effect"
    # the white list: 127.0.0.1 becomes global white, unsigned requests pass
    path.write_text(ACL.replace("  - 10.10.103.*", "  - 127.0.0.1"))
    os.utime(path, ns=(2 * 10**18, 2 * 10**18))
    assert wait_until(lambda: _call(port, send_cmd(TOPIC, b"w", msg_props())).code == 0, 10.0)


def test_the_java_producer_signs_as_the_broker_checks(acl_up: tuple[int, int, Path],
                                                      reference_build: Path,
                                                      tmp_path: Path) -> None:
    from deploy.reference import client_classpath

    ns, port, _home = acl_up
    assert _call(port, _signed(create_topic_cmd(TOPIC, 4), "adminKey1", "adminSecret1")).code == 0
    cp = client_classpath()
    out = tmp_path / "classes"
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(CLIENTS / "AclClient.java")],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)

    def run(ak: str, sk: str) -> list[str]:
        res = subprocess.run(["java", "-cp", f"{cp}:{out}", "AclClient", f"127.0.0.1:{ns}",
                              TOPIC, ak, sk, "3"], stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=120)  # fmt: skip
        return [ln for ln in res.stdout.decode().splitlines() if ln.startswith(("OK", "ERR"))]

    assert run("adminKey1", "adminSecret1") == ["OK SEND_OK"] * 3
    bad = run("adminKey1", "notTheSecret")
    assert len(bad) == 3 and all(ln.startswith("ERR 1 ") and "Check signature failed" in ln
                                 for ln in bad)  # fmt: skip
    sub = run("subscriber1", "subSecret1")
    assert len(sub) == 3 and all(f"No default permission for topic:{TOPIC}" in ln for ln in sub)
    unsigned = run("-", "-")
    assert len(unsigned) == 3 and all("No accessKey is configured" in ln for ln in unsigned)


def test_a_bad_acl_file_refuses_the_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("accounts:\n  - accessKey: short\n"
                                                 "    secretKey: x\n")  # fmt: skip
    conf = tmp_path / "b.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in SMALL_STORE.items()) +
                    f"aclEnable=true\nrocketmqHome={home}\n")  # fmt: skip
    argv = [sys.executable, "-m", "deploy", "up", "--data", str(tmp_path / "data"), "-c",
            str(conf), "--namesrv-port", str(launch.stable_free_port()), "--broker-port",
            str(launch.stable_free_port(pair=True)), "--spark-bridge-port", "0"]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert res.returncode == 2, res.stderr.decode()[-2000:]
    err = res.stderr.decode()
    assert "cannot start" in err and "length should longer than 6" in err, err[-2000:]


def test_python_clients_sign_their_requests(acl_up: tuple[int, int, Path]) -> None:
    from actors.client import Message, MQClientError, Producer

    ns, port, _home = acl_up
    assert _call(port, _signed(create_topic_cmd(TOPIC, 4), "adminKey1", "adminSecret1")).code == 0
    namesrv = f"127.0.0.1:{ns}"
    with Producer("acl_py_pg", namesrv=namesrv, access_key="adminKey1",
                  secret_key="adminSecret1") as p:  # fmt: skip
        for i in range(8):
            assert p.send(Message(TOPIC, f"m{i}".encode())).status == "SEND_OK"
    with Producer("acl_py_pg2", namesrv=namesrv, access_key="adminKey1",
                  secret_key="wrongSecret1", retries=0) as p:  # fmt: skip
        with pytest.raises(MQClientError) as err:
            p.send(Message(TOPIC, b"refused"))
        assert "Check signature failed for accessKey=adminKey1" in str(err.value)
        assert "wrongSecret1" not in str(err.value) and "wrongSecret1" not in repr(p._config)
    got = _consume_signed(namesrv, "acl_py_cg", 8, 30.0)
    assert got == {f"m{i}".encode() for i in range(8)}


def test_python_clients_sign_as_the_java_broker_checks(reference_build: Path,
                                                       tmp_path: Path) -> None:
    """The same Python clients against RocketMQ 4.9.8 itself with aclEnable=true."""
    from actors.client import Message, MQClientError, Producer
    from deploy import reference

    store = tmp_path / "refstore"
    (store / "rocketmq_home" / "conf").mkdir(parents=True)
    (store / "rocketmq_home" / "conf" / "plain_acl.yml").write_text(ACL)
    with reference.reference_cluster(str(store), {"aclEnable": "true"}) as ref:
        port = ref.broker_port
        assert _call(port, create_topic_cmd(TOPIC, 4)).code == 1  # unsigned: refused there too
        r = _call(port, _signed(create_topic_cmd(TOPIC, 4), "subscriber1", "subSecret1"))
        assert r.code == 1 and "Need admin permission for request code=17" in (r.remark or "")
        assert _call(port, _signed(create_topic_cmd(TOPIC, 4), "adminKey1",
                                   "adminSecret1")).code == 0  # fmt: skip
        namesrv = ref.namesrv_addr()
        assert wait_until(lambda: _route_ok(ref.namesrv_port) or None, 30.0)
        with Producer("acl_ref_pg", namesrv=namesrv, access_key="adminKey1",
                      secret_key="adminSecret1") as p:  # fmt: skip
            for i in range(4):
                assert p.send(Message(TOPIC, f"r{i}".encode())).status == "SEND_OK"
        with Producer("acl_ref_pg2", namesrv=namesrv, access_key="subscriber1",
                      secret_key="subSecret1", retries=0) as p:  # fmt: skip
            with pytest.raises(MQClientError) as err:
                p.send(Message(TOPIC, b"refused"))
            assert f"No default permission for topic:{TOPIC}" in str(err.value)
        assert len(_consume_signed(namesrv, "acl_ref_cg", 4, 60.0)) >= 4
        # our ACL admin command against the Java broker's ACL admin code
        cli = subprocess.run([sys.executable, "-m", "deploy", "admin", "updateAclConfig", "-n",
                            namesrv, "-b", ref.broker_addr(), "-a", "refUser12", "-s",
                            "refSecret12", "-i", "PUB", "--access-key", "adminKey1",
                            "--secret-key", "adminSecret1"], capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
        assert cli.returncode == 0, cli.stderr

        def new_account_sends() -> bool:
            cmd = _signed(send_cmd(TOPIC, b"n", msg_props()), "refUser12", "refSecret12")
            return _call(port, cmd).code == 0

        assert wait_until(new_account_sends, 30.0)


def _consume_signed(namesrv: str, group: str, n: int, timeout_s: float) -> set[bytes]:
    """The bodies a PushConsumer signing as subscriber1 gets from TOPIC (at least n of them,
    else the test fails)."""
    from actors.client.consumer import ConsumeResult, PushConsumer

    got: list[bytes] = []

    def handle(msgs: tuple[object, ...]) -> ConsumeResult:
        got.extend(m.body for m in msgs)  # type: ignore[attr-defined]
        return ConsumeResult.SUCCESS

    with PushConsumer(group, namesrv=namesrv, handler=handle, consume_from="first",
                      access_key="subscriber1", secret_key="subSecret1") as c:  # fmt: skip
        c.subscribe(TOPIC)
        assert wait_until(lambda: len(set(got)) >= n or None, timeout_s), got
    return set(got)


def _route_ok(ns_port: int, topic: str = TOPIC) -> bool:
    from tests.integration.e2e_helpers import get_route

    return get_route(("127.0.0.1", ns_port), topic).code == 0


def test_the_admin_cli_signs_with_its_keys(acl_up: tuple[int, int, Path]) -> None:
    ns, port, _home = acl_up

    def admin(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "deploy", "admin", *argv, "-n",
                               f"127.0.0.1:{ns}"], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})

    broker = f"127.0.0.1:{port}"
    r = admin("updateTopic", "-t", "AclCliT", "-b", broker)
    assert r.returncode == 1 and "No accessKey is configured" in r.stderr, r.stderr
    r = admin("updateTopic", "-t", "AclCliT", "-b", broker, "--access-key", "adminKey1")
    assert r.returncode == 2 and "--secret-key" in r.stderr
    r = admin("updateTopic", "-t", "AclCliT", "-b", broker, "--access-key", "subscriber1",
              "--secret-key", "subSecret1")  # fmt: skip
    assert r.returncode == 1 and "Need admin permission" in r.stderr
    assert "subSecret1" not in r.stderr + r.stdout
    r = admin("updateTopic", "-t", "AclCliT", "-b", broker, "--access-key", "adminKey1",
              "--secret-key", "adminSecret1")  # fmt: skip
    assert r.returncode == 0, r.stderr
    keys = {"ACTORMQ_ACCESS_KEY": "adminKey1", "ACTORMQ_SECRET_KEY": "adminSecret1"}
    assert wait_until(lambda: admin("topicRoute", "-t", "AclCliT").returncode == 0 or None, 10)
    r = admin("sendMessage", "-t", "AclCliT", "-p", "hi", env=keys)
    assert r.returncode == 0 and "SEND_OK" in r.stdout, r.stderr
    r = admin("consumeMessage", "-t", "AclCliT", "-c", "1", env=keys)
    assert r.returncode == 0 and "hi" in r.stdout, r.stderr


def test_acl_admin_commands_change_the_accounts_of_a_running_broker(
        acl_up: tuple[int, int, Path]) -> None:
    from actors.acl.acl_yaml import loads

    ns, port, home = acl_up
    broker = f"127.0.0.1:{port}"
    keys = {"ACTORMQ_ACCESS_KEY": "adminKey1", "ACTORMQ_SECRET_KEY": "adminSecret1"}

    def admin(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "deploy", "admin", *argv, "-n",
                               f"127.0.0.1:{ns}", "-b", broker], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL, env={**os.environ, **keys})

    assert _call(port, _signed(create_topic_cmd(TOPIC, 4), "adminKey1", "adminSecret1")).code == 0
    r = admin("updateAclConfig", "-a", "newUser12", "-s", "newSecret12", "-i", "PUB",
              "-t", f"{TOPIC}=PUB|SUB")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "newSecret12" not in r.stdout + r.stderr
    data = loads((home / "conf" / "plain_acl.yml").read_text())
    new = [a for a in data["accounts"] if a.get("accessKey") == "newUser12"]
    assert new and new[0]["secretKey"] == "newSecret12" and data["dataVersion"][0]["counter"]

    def sends(ak: str, sk: str) -> RemotingCommand:
        return _call(port, _signed(send_cmd(TOPIC, b"n", msg_props()), ak, sk))

    assert wait_until(lambda: sends("newUser12", "newSecret12").code == 0 or None, 10.0)
    r = admin("updateAclConfig", "-a", "short", "-s", "newSecret12")
    assert r.returncode == 1 and "length should longer than 6" in r.stderr
    r = admin("clusterAclConfigVersion")
    assert r.returncode == 0 and "plain_acl.yml" in r.stdout, r.stderr
    r = admin("deleteAccessConfig", "-a", "newUser12")
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: "No acl config for newUser12" in
                      (sends("newUser12", "newSecret12").remark or "") or None, 10.0)  # fmt: skip
    r = admin("updateGlobalWhiteAddr", "-g", "127.0.0.1")
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: _call(port, send_cmd(TOPIC, b"w", msg_props())).code == 0 or None,
                      10.0)  # fmt: skip


def test_forged_signatures_are_all_refused_and_a_good_client_is_served(
        acl_up: tuple[int, int, Path]) -> None:
    """10,000 sends with random signatures, a good signature moved onto another body or topic,
    unknown keys and no key: every one refused, none stored; a signed client keeps sending."""
    import random

    from tests.integration.e2e_helpers import get_route

    ns, port, _home = acl_up
    assert _call(port, _signed(create_topic_cmd(TOPIC, 1), "adminKey1", "adminSecret1")).code == 0
    assert wait_until(lambda: get_route(("127.0.0.1", ns), TOPIC).code == 0 or None, 10.0)
    rnd = random.Random(23)
    good = _signed(send_cmd(TOPIC, b"original", msg_props()), "adminKey1", "adminSecret1")
    sig = (good.ext_fields or {})["Signature"]
    forged: list[RemotingCommand] = []
    for i in range(10_000):
        cmd = send_cmd(TOPIC, rnd.randbytes(rnd.randint(1, 64)), msg_props())
        ext = dict(cmd.ext_fields or {})
        kind = i % 4
        if kind == 0:  # a random signature
            ext.update(AccessKey="adminKey1", Signature=rnd.randbytes(20).hex())
        elif kind == 1:  # a good request's signature replayed on another body
            ext.update(AccessKey="adminKey1", Signature=sig)
        elif kind == 2:  # an unknown key
            ext.update(AccessKey=f"nobody{i:04d}", Signature=sig)
        cmd.ext_fields = ext  # kind 3: no key at all
        forged.append(cmd)
    with BlockingClient(("127.0.0.1", port)) as bad, BlockingClient(("127.0.0.1", port)) as ok:
        for start in range(0, len(forged), 500):
            chunk = forged[start : start + 500]
            answers = bad.invoke_many(chunk, 30.0)
            assert all(a.code == 1 for a in answers), {a.code for a in answers}
            mine = _signed(send_cmd(TOPIC, f"good{start}".encode(), msg_props()), "adminKey1",
                           "adminSecret1")  # fmt: skip
            assert ok.invoke(mine, 10.0).code == 0
    # what is stored: only the 20 good sends
    q = RemotingCommand.request(RC.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"})
    r = _call(port, _signed(q, "adminKey1", "adminSecret1"))
    assert r.code == 0 and (r.ext_fields or {}).get("offset") == "20", r.ext_fields


def test_the_cpp_client_signs_with_session_credentials(acl_up: tuple[int, int, Path],
                                                       tmp_path: Path) -> None:
    """librocketmq 2.1.0 (the C++ core) with SetProducer/ConsumerSessionCredentials: good keys
    send and consume, a wrong secret is refused."""
    from tests.integration.e2e_helpers import run_driver
    from tests.integration.test_cpp_clients import _client_python

    python = _client_python(".venv-cpp2")
    ns, port, _home = acl_up
    topic = "AclCppT"
    assert _call(port, _signed(create_topic_cmd(topic, 4), "adminKey1", "adminSecret1")).code == 0
    assert wait_until(lambda: _route_ok(ns, topic) or None, 30.0)

    def run(ak: str, sk: str, name: str) -> list[dict[str, object]]:
        code, events, err = run_driver(
            [str(python), str(CLIENTS / "cpp_acl.py"), f"127.0.0.1:{ns}", topic, "4", ak, sk,
             "40"], tmp_path / name, 120.0, env=dict(os.environ, HOME=str(tmp_path)))  # fmt: skip
        assert code == 0, f"driver exit={code} stderr={err[-2000:]}"
        return events

    good = run("adminKey1", "adminSecret1", "good")
    assert [e["status"] for e in good if e["event"] == "sent"] == [0] * 4
    assert sorted(e["body"] for e in good if e["event"] == "received") == \
        [f"cpp-acl-{i}" for i in range(4)]  # fmt: skip
    bad = run("adminKey1", "notTheSecret1", "bad")
    refused = [e for e in bad if e["event"] == "refused"]
    assert len(refused) == 4 and not any(e["event"] == "sent" for e in bad)


def test_rocketmq_acl_plain_file_names_the_accounts_file(tmp_path: Path) -> None:
    """`rocketmq.acl.plain.file` in broker.conf (Java's -Drocketmq.acl.plain.file), relative
    to rocketmqHome: the broker and `up`'s name server read their accounts there and not from
    conf/plain_acl.yml; a name that is no file refuses the start (exit 2) naming it."""
    home = tmp_path / "home"
    (home / "conf" / "team").mkdir(parents=True)
    (home / "conf" / "team" / "acl.yml").write_text(ACL)
    (home / "conf" / "plain_acl.yml").write_text(  # the default place: not to be read
        "accounts:\n  - accessKey: elsewhere1\n    secretKey: elsewhereSecret1\n    admin: true\n")
    run, ns, port, _data = start_up_process(
        tmp_path, ADMIN_ENV, aclEnable="true", rocketmqHome=str(home),
        **{"rocketmq.acl.plain.file": "conf/team/acl.yml"})  # fmt: skip
    try:
        create = create_topic_cmd(TOPIC, 4)
        assert _call(port, _signed(create, "adminKey1", "adminSecret1")).code == 0
        r = _call(port, _signed(create_topic_cmd(TOPIC, 4), "elsewhere1", "elsewhereSecret1"))
        assert r.code == 1 and "No acl config for elsewhere1" in (r.remark or ""), r.remark
        def put_kv(value: str) -> RemotingCommand:  # a name-server write: admin accounts only
            ext = {"namespace": "NS", "key": "k", "value": value}
            return RemotingCommand.request(RC.PUT_KV_CONFIG, ext)

        assert _call(ns, _signed(put_kv("v"), "adminKey1", "adminSecret1")).code == 0
        r = _call(ns, _signed(put_kv("w"), "elsewhere1", "elsewhereSecret1"))
        assert r.code != 0 and "No acl config for elsewhere1" in (r.remark or ""), r.remark
    finally:
        run.stop()

    conf = tmp_path / "missing.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in SMALL_STORE.items()) +
                    f"aclEnable=true\nrocketmqHome={home}\n"
                    "rocketmq.acl.plain.file=conf/nothing_here.yml\n")  # fmt: skip
    argv = [sys.executable, "-m", "deploy", "up", "--data", str(tmp_path / "data2"), "-c",
            str(conf), "--namesrv-port", str(launch.stable_free_port()), "--broker-port",
            str(launch.stable_free_port(pair=True)), "--spark-bridge-port", "-1"]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    err = res.stderr.decode()
    assert res.returncode == 2 and "nothing_here.yml does not exist" in err, err[-2000:]
