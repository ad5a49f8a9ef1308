"""`actormq admin` against a real cluster: the mqadmin-style tools end to end over sockets."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from deploy.admin import main as admin_main
from deploy.wire import BlockingClient
from protocol.bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper
from protocol.command import RemotingCommand
from tests.integration.e2e_helpers import start_real, wait_until

pytestmark = pytest.mark.integration


def _admin(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = admin_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _groups(broker: str) -> dict[str, SubscriptionGroupConfig]:
    """The broker's subscription group table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
    with BlockingClient(broker) as cl:
        resp = cl.invoke(RemotingCommand.request(201), 10.0)
    assert resp.code == 0
    return SubscriptionGroupWrapper.from_json(bytes(resp.body)).subscription_group_table


def test_admin_tools_round_trip(local_cluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = start_real(local_cluster)
    ns = cluster.namesrv_addr()
    broker = f"127.0.0.1:{cluster.broker_port()}"

    code, out, _ = _admin(capsys, "clusterList", "-n", ns)
    row = r"DefaultCluster\s+broker-a\s+0\s+127\.0\.0\.1:\d+\s+V4_9_8"
    assert code == 0 and re.search(row, out), out

    code, out, err = _admin(capsys, "updateTopic", "-n", ns, "-c", "DefaultCluster",
                            "-t", "AdminT", "-r", "2", "-w", "2")  # fmt: skip
    assert code == 0 and "success" in out, err
    code, out, _ = _admin(capsys, "topicList", "-n", ns)
    assert code == 0 and "AdminT" in out.split()
    code, out, _ = _admin(capsys, "topicRoute", "-n", ns, "-t", "AdminT")
    assert code == 0 and '"writeQueueNums": 2' in out

    ids = []
    for i in range(3):
        code, out, err = _admin(capsys, "sendMessage", "-n", ns, "-t", "AdminT",
                                "-p", f"hello-{i}", "--tags", "TagA", "--keys", f"k{i}",
                                "-q", str(i % 2))  # fmt: skip
        assert code == 0 and "SEND_OK" in out, err
        ids.append(re.search(r"offsetMsgId=([0-9A-F]+)", out).group(1))  # type: ignore[union-attr]

    code, out, _ = _admin(capsys, "topicStatus", "-n", ns, "-t", "AdminT")
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    assert code == 0 and re.search(rf"broker-a\s+0\s+0\s+2\s+{stamp}", out), out
    assert re.search(rf"broker-a\s+1\s+0\s+1\s+{stamp}", out), out

    code, out, err = _admin(capsys, "updateSubGroup", "-n", ns, "-c", "DefaultCluster",
                            "-g", "AdminSG", "-r", "5", "-d", "false")  # fmt: skip
    assert code == 0 and "success" in out, err
    groups = _groups(broker)
    assert groups["AdminSG"].retry_max_times == 5
    assert groups["AdminSG"].consume_broadcast_enable is False
    code, out, err = _admin(capsys, "deleteSubGroup", "-n", ns, "-b", broker, "-g", "AdminSG")
    assert code == 0 and "success" in out, err
    assert wait_until(lambda: "AdminSG" not in _groups(broker), 10.0)
    code, _, err = _admin(capsys, "deleteSubGroup", "-n", ns, "-g", "AdminSG")
    assert code == 2 and "-c cluster or -b broker" in err

    code, out, _ = _admin(capsys, "queryMsgById", "-n", ns, "-i", ids[1])
    assert code == 0 and "body='hello-1'" in out and "keys=k1" in out
    code, out, _ = _admin(capsys, "queryMsgByKey", "-n", ns, "-t", "AdminT", "-k", "k2")
    assert code == 0 and "body='hello-2'" in out and "hello-1" not in out

    code, out, _ = _admin(capsys, "consumeMessage", "-n", ns, "-t", "AdminT", "-g", "AdminCG",
                          "--from-start")  # fmt: skip
    assert code == 0 and "consumed 3 message(s)" in out
    assert {f"hello-{i}" for i in range(3)} <= set(re.findall(r"body='([^']*)'", out))
    code, out, _ = _admin(capsys, "consumerProgress", "-n", ns, "-g", "AdminCG")
    assert code == 0 and "Diff Total: 0" in out
    assert re.search(r"AdminT\s+broker-a\s+0\s+2\s+2\s+0", out), out
    code, out, _ = _admin(capsys, "consumeMessage", "-n", ns, "-t", "AdminT", "-g", "AdminCG")
    assert code == 0 and "consumed 0 message(s)" in out  # the committed offsets were used

    # statsAll: the send and pull actors publish their counts every 10 s
    row = re.compile(r"AdminT\s+AdminCG\s+0\s+[0-9.]+\s+[0-9.]+\s+3\s+3\s*$", re.M)

    def stats_all() -> str | None:
        code, out, _ = _admin(capsys, "statsAll", "-n", ns, "-t", "AdminT")
        return out if code == 0 and row.search(out) else None

    assert wait_until(stats_all, 30.0, 1.0), _admin(capsys, "statsAll", "-n", ns)[1]

    code, out, _ = _admin(capsys, "deleteTopic", "-n", ns, "-c", "DefaultCluster", "-t", "AdminT")
    assert code == 0
    code, out, err = _admin(capsys, "topicRoute", "-n", ns, "-t", "AdminT")
    assert code == 1 and "TOPIC_NOT_EXIST" in err
    code, _, err = _admin(capsys, "updateTopic", "-n", ns, "-b", broker, "-t", "bad topic!")
    assert code == 1 and "code 1" in err  # the broker's own validation, reported


def test_admin_bad_arguments_exit_2() -> None:
    run = [sys.executable, "-m", "deploy", "admin"]
    env_free = {"PATH": "/usr/bin:/bin"}
    for argv, needle in (
        (["topicList"], "no name server"),
        (["topicList", "-n", "nohost"], "bad address"),
        (["queryMsgById", "-n", "127.0.0.1:1", "-i", "zz"], "bad message id"),
        (["updateTopic", "-n", "127.0.0.1:1", "-t", "T", "-r", "0"], "must be > 0"),
        (["nosuchcommand"], "invalid choice"),
    ):
        p = subprocess.run([*run, *argv], capture_output=True, text=True, timeout=60,
                           env=env_free, cwd=".")  # fmt: skip
        assert p.returncode == 2 and needle in p.stderr, (argv, p.stderr)
    p = subprocess.run([*run, "topicList", "-n", "127.0.0.1:1"], capture_output=True, text=True,
                       timeout=60, env=env_free)  # fmt: skip
    assert p.returncode == 1 and "refused" in p.stderr.lower()


def test_admin_send_message_properties(local_cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """sendMessage --property: user properties arrive; a system name (TAGS, UNIQ_KEY,
    TRAN_MSG: a half message never delivered), a blank value, \\x01 / \\x02 in a property,
    the tags or the keys exit 2 with the reason, and nothing of them is stored."""
    from tests.integration.client_helpers import read_queue

    cluster = start_real(local_cluster)
    ns = cluster.namesrv_addr()
    broker = f"127.0.0.1:{cluster.broker_port()}"
    assert _admin(capsys, "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "AdmP",
                  "-r", "1", "-w", "1")[0] == 0  # fmt: skip
    send = ("sendMessage", "-n", ns, "-t", "AdmP", "-p", "bad")
    for extra, needle in (
        (("--property", "TRAN_MSG=true"), "The Property<TRAN_MSG> is used by system"),
        (("--property", "UNIQ_KEY=X"), "The Property<UNIQ_KEY> is used by system"),
        (("--property", "TAGS=Injected"), "The Property<TAGS> is used by system"),
        (("--property", "k="), "can not be null or blank string"),
        (("--property", "=v"), "can not be null or blank string"),
        (("--property", "novalue"), "give NAME=VALUE"),
        (("--property", "k=v\x02TAGS\x01Injected"), "holds \\x01 or \\x02"),
        (("--tags", "A\x02UNIQ_KEY\x01X"), "the tags 'A\\x02UNIQ_KEY\\x01X' hold"),
        (("--keys", "k\x01"), "the keys 'k\\x01' hold"),
    ):
        code, out, err = _admin(capsys, *send, *extra)
        assert code == 2 and needle in err and "SEND_OK" not in out, (extra, code, err)
    code, out, err = _admin(capsys, "sendMessage", "-n", ns, "-t", "AdmP", "-p", "good",
                            "--tags", "T", "--property", "color=red", "--property",
                            "CHECK_IMMUNITY_TIME_IN_SECONDS=30")  # fmt: skip
    assert code == 0 and "SEND_OK" in out, err
    stored = read_queue(broker, "admp_checker", "AdmP", 0)
    assert [m.body for m in stored] == [b"good"]
    props = stored[0].properties
    assert props["color"] == "red" and props["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    assert props["TAGS"] == "T"


def test_admin_connection_status_and_reset_tools(local_cluster,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """brokerStatus, consumer/producer connections, resetOffsetByTime, consumerStatus."""
    import json
    import time

    from deploy.wire import BlockingClient
    from protocol.command import RemotingCommand
    from tests.integration.e2e_helpers import RPC_TIMEOUT_S, broker_addr, heartbeat_cmd

    cluster = start_real(local_cluster)
    ns = cluster.namesrv_addr()
    broker = f"127.0.0.1:{cluster.broker_port()}"
    assert _admin(capsys, "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "AdmR",
                  "-r", "1", "-w", "1")[0] == 0  # fmt: skip
    for i in range(4):
        assert _admin(capsys, "sendMessage", "-n", ns, "-t", "AdmR", "-p", f"r{i}")[0] == 0
        time.sleep(0.01)
    code, out, _ = _admin(capsys, "brokerStatus", "-n", ns, "-b", broker)
    assert code == 0 and re.search(r"brokerVersionDesc\s+: V4_9_8", out)

    with BlockingClient(broker_addr(cluster)) as cl:  # a consumer + a producer stay connected
        hb = heartbeat_cmd("10.9.9.9@it", "AdmCG", {"AdmR": "*"})
        body = json.loads(hb.body)
        body["producerDataSet"].append({"groupName": "AdmPG"})
        hb = RemotingCommand.request(34, None, json.dumps(body).encode())
        assert cl.invoke(hb, RPC_TIMEOUT_S).code == 0
        upd = RemotingCommand.request(15, {"consumerGroup": "AdmCG", "topic": "AdmR",
                                           "queueId": "0", "commitOffset": "3"})
        assert cl.invoke(upd, RPC_TIMEOUT_S).code == 0

        code, out, _ = _admin(capsys, "consumerConnection", "-n", ns, "-g", "AdmCG")
        assert code == 0 and "10.9.9.9@it" in out and "CLUSTERING" in out
        code, out, _ = _admin(capsys, "producerConnection", "-n", ns, "-g", "AdmPG", "-t", "AdmR")
        assert code == 0 and "10.9.9.9@it" in out and "JAVA" in out
        code, out, _ = _admin(capsys, "resetOffsetByTime", "-n", ns, "-g", "AdmCG", "-t", "AdmR",
                              "-s", "0")  # fmt: skip
        assert code == 0 and re.search(r"AdmR\s+broker-a\s+queue 0: offset 0", out), out
        # the broker told the connected consumer (RESET_CONSUMER_CLIENT_OFFSET, oneway)
        cl.read_for(0.5)
        assert any(r.code == 220 and r.ext_fields["group"] == "AdmCG" for r in cl.requests)
        code, _, err = _admin(capsys, "consumerStatus", "-n", ns, "-g", "AdmCG", "-i", "nobody")
        assert code == 1 and "not online" in err
    code, _, err = _admin(capsys, "resetOffsetByTime", "-n", ns, "-g", "AdmCG", "-t", "AdmR",
                          "-s", "yesterday")  # fmt: skip
    assert code == 2 and "bad timestamp" in err
    # the consumer is gone (its connection closed): offsets are written directly
    ok = wait_until(lambda: _admin(capsys, "consumerConnection", "-n", ns, "-g", "AdmCG")[0] == 1,
                    10.0, 0.2)  # fmt: skip
    assert ok, "the consumer's channel never went away"
    code, out, err = _admin(capsys, "resetOffsetByTime", "-n", ns, "-g", "AdmCG", "-t", "AdmR",
                            "-s", "now")  # fmt: skip
    # SEARCH_OFFSET_BY_TIMESTAMP past the last message gives that message's offset (3)
    assert code == 0 and "queue 0: offset 3 (group offline)" in out, (out, err)
    code, out, _ = _admin(capsys, "consumerProgress", "-n", ns, "-g", "AdmCG")
    assert re.search(r"AdmR\s+broker-a\s+0\s+4\s+3\s+1", out), out
    code, _, err = _admin(capsys, "queryMsgByKey", "-n", ns, "-t", "AdmR", "-k", "nokey")
    assert code == 1 and "no message" in err


def test_admin_update_broker_config_live(local_cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """updateBrokerConfig reaches the broker's other processes: the send actor answers with the
    new MSG_REGION, and brokerPermission=4 is re-registered (the route turns read-only)."""
    from deploy.wire import BlockingClient
    from tests.integration.e2e_helpers import RPC_TIMEOUT_S, msg_props, send_cmd

    cluster = start_real(local_cluster)
    ns = cluster.namesrv_addr()
    broker = f"127.0.0.1:{cluster.broker_port()}"
    assert _admin(capsys, "updateTopic", "-n", ns, "-b", broker, "-t", "CfgT")[0] == 0
    code, out, err = _admin(capsys, "updateBrokerConfig", "-n", ns, "-b", broker,
                            "-k", "regionId", "-v", "EastRegion")  # fmt: skip
    assert code == 0 and "success" in out, err
    code, out, _ = _admin(capsys, "getBrokerConfig", "-n", ns, "-b", broker)
    assert code == 0 and re.search(r"regionId\s+=\s+EastRegion", out)

    def region() -> str | None:
        with BlockingClient(("127.0.0.1", cluster.broker_port())) as cl:
            r = cl.invoke(send_cmd("CfgT", b"x", msg_props()), RPC_TIMEOUT_S)
            return (r.ext_fields or {}).get("MSG_REGION")

    assert wait_until(lambda: region() == "EastRegion", 10.0, 0.1), region()
    code, _, err = _admin(capsys, "updateBrokerConfig", "-n", ns, "-b", broker,
                          "-k", "brokerPermission", "-v", "4")  # fmt: skip
    assert code == 0, err

    def route_perm() -> bool:
        code, out, _ = _admin(capsys, "topicRoute", "-n", ns, "-t", "CfgT")
        return code == 0 and '"perm": 4' in out

    assert wait_until(route_perm, 15.0, 0.2), "the name server never saw the read-only perm"
    code, _, err = _admin(capsys, "updateBrokerConfig", "-n", ns, "-b", broker,
                          "-k", "brokerPermission", "-v", "lots")  # fmt: skip
    assert code == 1 and "brokerPermission" in err
