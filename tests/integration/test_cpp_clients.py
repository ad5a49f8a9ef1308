"""Unmodified RocketMQ C++ clients (librocketmq 1.x and 2.1.0) against a real actormq cluster.

Spec §14.4 / §14.7 row 10: the C++ core sends JSON headers with numeric extFields, heartbeats
with enum ordinals and a string subVersion, and decodes pull bodies with 4-byte hosts. Each
client runs tests/clients/cpp_roundtrip.py in its own virtualenv (made by
tests/clients/setup_cpp_clients.sh, which ./bin/test runs): it produces messages with tags and
keys, then consumes them with a push consumer and a tag expression.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.e2e_helpers import run_driver, start_real

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
DRIVER = CLIENTS / "cpp_roundtrip.py"
COUNT = 30
CONSUME_TIMEOUT_S = 40
WALL_TIMEOUT_S = 90.0


def _client_python(venv: str) -> Path:
    """The interpreter of a client virtualenv; the test is skipped, saying why, without it."""
    python = CLIENTS / venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{venv} missing: run tests/clients/setup_cpp_clients.sh (x86_64 only)")
    return python


def _run(python: Path, namesrv: str, topic: str, expression: str, tmp: Path,
         *extra: str) -> list[dict]:
    """Run the driver in its venv (the C++ core writes its logs under $HOME/logs)."""
    code, events, err = run_driver(
        [str(python), str(DRIVER), namesrv, topic, str(COUNT), expression,
         str(CONSUME_TIMEOUT_S), *extra],
        tmp / topic, WALL_TIMEOUT_S, env=dict(os.environ, HOME=str(tmp)),
    )
    assert code == 0, f"driver exit={code} stderr={err[-2000:]}"
    return events


@pytest.mark.parametrize(
    ("venv", "expression"),
    [(".venv-cpp1", "*"), (".venv-cpp2", "Tag1")],
    ids=["cpp-1.x-all", "cpp-2.1-tag-filter"],
)
def test_cpp_client_produce_and_consume(local_cluster, tmp_path: Path, venv: str,
                                        expression: str) -> None:
    python = _client_python(venv)
    cluster = start_real(local_cluster)
    topic = f"CppRoundTrip{venv[-1]}"
    events = _run(python, cluster.namesrv_addr(), topic, expression, tmp_path)

    sent = {e["i"]: e for e in events if e["event"] == "sent"}
    assert sorted(sent) == list(range(COUNT))
    assert all(e["status"] == 0 for e in sent.values()), "every send must be SEND_OK"
    assert len({e["msgId"] for e in sent.values()}) == COUNT

    received = [e for e in events if e["event"] == "received"]
    wanted = {i for i in range(COUNT) if expression == "*" or f"Tag{i % 3}" == expression}
    bodies = [e["body"] for e in received]
    assert sorted(bodies) == sorted(f"body-{i}" for i in wanted), "exactly the matching messages"
    for e in received:
        i = int(e["body"].split("-")[1])
        assert e["tags"] == f"Tag{i % 3}" and e["keys"] == f"key-{i}" and e["topic"] == topic
        assert e["queueOffset"] == sent[i]["queueOffset"], f"queue offset of body-{i}"
    assert events[-1]["event"] == "done"


@pytest.mark.parametrize("venv", [".venv-cpp1", ".venv-cpp2"], ids=["cpp-1.x", "cpp-2.1"])
def test_cpp_orderly_send_and_consume(local_cluster, tmp_path: Path, venv: str) -> None:
    """send_orderly to queue i % 3, orderly push consumer (LOCK_BATCH_MQ): per-queue order kept."""
    python = _client_python(venv)
    cluster = start_real(local_cluster)
    topic = f"CppOrderly{venv[-1]}"
    events = _run(python, cluster.namesrv_addr(), topic, "*", tmp_path, "orderly")

    sent = {e["i"]: e for e in events if e["event"] == "sent"}
    assert sorted(sent) == list(range(COUNT)) and all(e["status"] == 0 for e in sent.values())
    received = [e for e in events if e["event"] == "received"]
    assert sorted(e["body"] for e in received) == sorted(f"body-{i}" for i in range(COUNT))
    per_queue: dict[int, list[int]] = {}
    for e in received:  # in delivery order
        i = int(e["body"].split("-")[1])
        assert e["queueId"] == i % 3, f"body-{i} must sit in queue {i % 3}"
        per_queue.setdefault(e["queueId"], []).append(i)
    for qid, order in per_queue.items():
        assert order == sorted(order), f"queue {qid} delivered out of order: {order}"


def test_cpp_transaction_commit_rollback_and_check_back(local_cluster, tmp_path: Path) -> None:
    """librocketmq 2.1.0's transaction producer (spec §14.7 row 7): COMMIT is consumed, ROLLBACK
    never is, UNKNOWN gets a CHECK_TRANSACTION_STATE and is consumed once the checker commits."""
    python = _client_python(".venv-cpp2")
    cluster = start_real(local_cluster, transactionCheckInterval="1000", transactionTimeOut="1000")
    topic, n = "CppTransaction", 3
    code, events, err = run_driver(
        [str(python), str(CLIENTS / "cpp_transaction.py"), cluster.namesrv_addr(), topic, str(n),
         str(CONSUME_TIMEOUT_S)],
        tmp_path / topic, WALL_TIMEOUT_S, env=dict(os.environ, HOME=str(tmp_path)),
    )
    assert code == 0, f"driver exit={code} stderr={err[-2000:]}"
    sent = [e for e in events if e["event"] == "sent"]
    assert len(sent) == 3 * n and all(e["rc"] == 0 and e["status"] == 0 for e in sent), sent
    checked = {e["body"] for e in events if e["event"] == "checked"}
    assert {f"unknown-{i}" for i in range(n)} <= checked
    assert not {b for b in checked if not b.startswith("unknown-")}, "only UNKNOWN is checked"
    for e in events:
        if e["event"] == "checked":
            assert e["topic"] == topic and int(e["checkTimes"]) >= 1
    received = [e["body"] for e in events if e["event"] == "received"]
    assert set(received) == {f"{k}-{i}" for k in ("commit", "unknown") for i in range(n)}
    assert len(received) == len(set(received)), f"duplicates: {received}"
    assert events[-1]["event"] == "done"


@pytest.mark.parametrize("venv", [".venv-cpp1", ".venv-cpp2"], ids=["cpp-1.x", "cpp-2.1"])
def test_cpp_consumer_running_info_relayed(local_cluster, tmp_path: Path, venv: str) -> None:
    """mqadmin consumerStatus: GET_CONSUMER_RUNNING_INFO goes to the consumer itself and its
    own answer (ConsumerRunningInfo) comes back to the asker."""
    import json
    import signal
    import subprocess

    from deploy.wire import BlockingClient
    from protocol.codes import RequestCode
    from protocol.command import RemotingCommand
    from tests.integration.e2e_helpers import broker_addr, wait_until

    python = _client_python(venv)
    cluster = start_real(local_cluster)
    group, topic = f"CG_Info{venv[-1]}", f"CppInfo{venv[-1]}"
    with BlockingClient(broker_addr(cluster)) as cl:  # the route exists before the client starts
        r = cl.invoke(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4",
            "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG"}),
            timeout_s=10.0)  # fmt: skip
        assert r.code == 0, r.remark
    out = tmp_path / "hold.out"
    with open(out, "wb") as o, open(tmp_path / "hold.err", "wb") as e:
        proc = subprocess.Popen(
            [str(python), str(CLIENTS / "cpp_consumer_hold.py"), cluster.namesrv_addr(), topic,
             group, "40"], stdout=o, stderr=e, stdin=subprocess.DEVNULL,
            env=dict(os.environ, HOME=str(tmp_path)), start_new_session=True)  # fmt: skip
    try:
        with BlockingClient(broker_addr(cluster)) as cl:
            def client_ids() -> list[str]:
                r = cl.invoke(RemotingCommand.request(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}))
                return json.loads(bytes(r.body))["consumerIdList"] if r.code == 0 and r.body else []

            ids = wait_until(client_ids, 30.0, 0.2)
            assert ids, "the C++ consumer never heartbeated"
            r = cl.invoke(RemotingCommand.request(
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": group, "clientId": ids[0], "jstackEnable": "false"}),
                timeout_s=15.0)  # fmt: skip
            assert r.code == 0, r.remark
            # the client's own ConsumerRunningInfo, passed on as is (fastjson-style map keys)
            text = bytes(r.body).decode("utf-8", "replace")
            assert '"properties"' in text and '"subscriptionSet"' in text, text[:500]
            assert topic in text
            r = cl.invoke(RemotingCommand.request(
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": group, "clientId": "nobody@x"}))  # fmt: skip
            assert r.code == 1 and "not online" in r.remark
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_cpp_client_across_two_brokers(local_cluster, tmp_path: Path) -> None:
    """A two-master cluster (broker-a, broker-b) under one name server: the topic created on
    both masters, the C++ producer spreads messages over both, the push consumer gets all."""
    import os as _os

    from actors.broker.config import BrokerConfig
    from deploy import launch
    from deploy.admin import main as admin_main
    from deploy.wire import BlockingClient
    from protocol.command import RemotingCommand
    from store.config import StoreConfig

    python = _client_python(".venv-cpp2")
    cluster = start_real(local_cluster)
    props = {"listenPort": "0", "brokerName": "broker-b", "namesrvAddr": cluster.namesrv_addr(),
             "storePathRootDir": _os.path.join(str(tmp_path), "store-b"),
             "mappedFileSizeCommitLog": "4194304"}  # fmt: skip
    port_b = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                                 StoreConfig.from_properties(props))  # fmt: skip
    ns = cluster.namesrv_addr()
    assert admin_main(["updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "TwoBrokers",
                       "-r", "2", "-w", "2"]) == 0  # fmt: skip
    code, events, err = run_driver(
        [str(python), str(DRIVER), ns, "TwoBrokers", str(COUNT), "*", str(CONSUME_TIMEOUT_S)],
        tmp_path / "two", WALL_TIMEOUT_S, env=dict(os.environ, HOME=str(tmp_path)),
    )
    assert code == 0, f"driver exit={code} stderr={err[-2000:]}"
    sent = [e for e in events if e["event"] == "sent"]
    assert len(sent) == COUNT and all(e["status"] == 0 for e in sent)
    received = sorted(e["body"] for e in events if e["event"] == "received")
    assert received == sorted(f"body-{i}" for i in range(COUNT))
    stored = {}
    for name, port in (("broker-a", cluster.broker_port("broker-a")), ("broker-b", port_b)):
        with BlockingClient(("127.0.0.1", port)) as cl:
            stored[name] = sum(
                int(cl.invoke(RemotingCommand.request(
                    30, {"topic": "TwoBrokers", "queueId": str(q)})).ext_fields["offset"])
                for q in range(2)
            )  # fmt: skip
    assert sum(stored.values()) == COUNT and min(stored.values()) > 0, stored


def test_cpp_consumer_retry_after_reconsume_later(local_cluster, tmp_path: Path) -> None:
    """Spec §14.7 row 5: RECONSUME_LATER -> CONSUMER_SEND_MSG_BACK -> redelivery from the retry
    topic after delay level 3 (about 10 s) with reconsumeTimes 1, then never again."""
    python = _client_python(".venv-cpp2")
    cluster = start_real(local_cluster)
    n = 3
    code, events, err = run_driver(
        [str(python), str(CLIENTS / "cpp_retry.py"), cluster.namesrv_addr(), "CppRetry", str(n),
         "60"], tmp_path / "retry", WALL_TIMEOUT_S, env=dict(os.environ, HOME=str(tmp_path)),
    )  # fmt: skip
    assert code == 0, f"driver exit={code} stderr={err[-2000:]}"
    assert [e["status"] for e in events if e["event"] == "sent"] == [0] * n
    by_body: dict[str, list[dict]] = {}
    for e in events:
        if e["event"] == "delivery":
            by_body.setdefault(e["body"], []).append(e)
    assert sorted(by_body) == [f"retry-{i}" for i in range(n)]
    for body, deliveries in by_body.items():
        assert [d["reconsumeTimes"] for d in deliveries] == [0, 1], (body, deliveries)
        assert deliveries[1]["after_s"] >= 5.0, f"{body} came back too early: {deliveries}"
        assert deliveries[1]["topic"] == "CppRetry"  # the client restores the real topic


@pytest.mark.parametrize("venv", [".venv-cpp1", ".venv-cpp2"], ids=["cpp-1.x", "cpp-2.1"])
def test_cpp_batch_send(local_cluster, tmp_path: Path, venv: str) -> None:
    """Spec §14.7 row 8: send_batch (SEND_BATCH_MESSAGE) of 10 -> 10 consecutive queue offsets in
    one queue, every message consumed with its own keys and tags."""
    python = _client_python(venv)
    cluster = start_real(local_cluster)
    topic = f"CppBatch{venv[-1]}"
    events = _run(python, cluster.namesrv_addr(), topic, "*", tmp_path, "batch")
    sent = [e for e in events if e["event"] == "sent"]
    assert [e["size"] for e in sent] == [10] * (COUNT // 10) and all(e["status"] == 0 for e in sent)
    received = [e for e in events if e["event"] == "received"]
    assert sorted(e["body"] for e in received) == sorted(f"body-{i}" for i in range(COUNT))
    for b in sent:  # a batch sits in one queue at consecutive offsets
        mine = [e for e in received if b["i"] <= int(e["body"].split("-")[1]) < b["i"] + 10]
        assert len({e["queueId"] for e in mine}) == 1
        offs = sorted(e["queueOffset"] for e in mine)
        assert offs == list(range(offs[0], offs[0] + 10)), offs
    for e in received:
        i = int(e["body"].split("-")[1])
        assert e["keys"] == f"key-{i}" and e["tags"] == f"Tag{i % 3}"


def test_cpp_delay_level_two(local_cluster, tmp_path: Path) -> None:
    """Spec §14.7 row 6: delay level 2 is delivered after about 5 s, on its own topic."""
    python = _client_python(".venv-cpp2")
    cluster = start_real(local_cluster)
    code, events, err = run_driver(
        [str(python), str(DRIVER), cluster.namesrv_addr(), "CppDelay", "5", "*",
         str(CONSUME_TIMEOUT_S), "delay"],
        tmp_path / "delay", WALL_TIMEOUT_S, env=dict(os.environ, HOME=str(tmp_path)),
    )  # fmt: skip
    assert code == 0, f"driver exit={code} stderr={err[-2000:]}"
    assert [e["status"] for e in events if e["event"] == "sent"] == [0] * 5
    received = [e for e in events if e["event"] == "received"]
    assert sorted(e["body"] for e in received) == [f"body-{i}" for i in range(5)]
    for e in received:
        assert e["topic"] == "CppDelay"
        assert e["after_s"] >= 4.0, f"{e['body']} was delivered before its delay: {e}"
