"""A Python, a Java and an ali-ons consumer in one consumer group split the queues with no
overlap and no gap, for every allocation strategy of the Java client.

The Java member is tests/clients/MixedConsumer.java on the reference's 4.9.8 client jars
(compiled here with javac); the Node member is tests/clients/alions_consumer.js on the
unmodified ali-ons. ali-ons ships only AllocateMessageQueueAveragely: the driver hands it the
other strategies written in JavaScript (its allocateMessageQueueStrategy option takes any
object), except AllocateMachineRoomNearby, whose rounds run with two Python members and the Java
one. Every member's queues must equal what the strategy gives it for the group's consumer list
(GET_CONSUMER_LIST_BY_GROUP), and together they must cover the topic exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.client.consumer import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    ConsumeResult,
    PushConsumer,
)
from actors.client.consumer.allocate import AllocateMessageQueueStrategy, QueueLike
from deploy.wire import BlockingClient
from protocol.bodies import GetConsumerListByGroupResponseBody, MessageQueue
from tests.integration.client_helpers import Target, start_actormq, stop_actormq
from tests.integration.consumer_helpers import FAST, create_topic, wait_for
from tests.integration.e2e_helpers import RPC_TIMEOUT_S, simple_cmd

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
BROKER = "hz@broker-a"  # a machine-room style name ("idc@name") for MACHINE_ROOM / NEARBY
TOPIC = "MixedGroup"
QUEUES = 8
CONFIG_SPLIT = {"py": "0,3,6", "java": "1,4,7", "node": "2,5"}


class Rooms:
    """The NEARBY resolver the Java driver uses: the text before the first '@'."""

    def broker_deploy_in(self, mq: QueueLike) -> str:
        return mq.broker_name.split("@", 1)[0]

    def consumer_deploy_in(self, cid: str) -> str:
        return cid.split("@", 1)[0]


def strategy(name: str, member: str) -> tuple[AllocateMessageQueueStrategy, str]:
    """(Python strategy, the drivers' PARAM) for a round."""
    if name == "AVG":
        return AllocateMessageQueueAveragely(), ""
    if name == "AVG_BY_CIRCLE":
        return AllocateMessageQueueAveragelyByCircle(), ""
    if name == "CONSISTENT_HASH":
        return AllocateMessageQueueConsistentHash(10), "10"
    if name == "MACHINE_ROOM":
        return AllocateMessageQueueByMachineRoom(["hz"]), "hz"
    if name == "NEARBY":
        return AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), Rooms()), "AVG"
    qids = CONFIG_SPLIT[member]
    return (AllocateMessageQueueByConfig(
        [MessageQueue(TOPIC, BROKER, int(q)) for q in qids.split(",")]),
        ",".join(f"{BROKER}:{q}" for q in qids.split(",")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    target = start_actormq(Path(tmp_path_factory.mktemp("mixed")), brokers=(BROKER,))
    try:
        create_topic(target, TOPIC, QUEUES)
        yield target
    finally:
        assert stop_actormq(target) == []


@pytest.fixture(scope="module")
def java_classes(reference_build: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[str, str]:  # fmt: skip
    from deploy.reference import client_classpath

    cp = client_classpath()
    out = tmp_path_factory.mktemp("mixedjava")
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out),
                    str(CLIENTS / "MixedConsumer.java")],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    return cp, str(out)


class Member:
    """A consumer process whose JSON lines are read from a file; stopped by closing stdin,
    else by its session's PID."""

    def __init__(self, argv: list[str], out: Path, cwd: Path | None = None) -> None:
        self.out = out
        with open(out, "wb") as f, open(out.with_suffix(".err"), "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=f, stderr=err, stdin=subprocess.PIPE,
                                         cwd=cwd, start_new_session=True)

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.out.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def cid(self) -> str | None:
        return next((e["cid"] for e in self.events() if e["event"] == "ready"), None)

    def queues(self) -> set[MessageQueue]:
        last = [e for e in self.events() if e["event"] == "assigned"]
        if not last:
            return set()
        return {MessageQueue(TOPIC, q.rsplit(":", 1)[0], int(q.rsplit(":", 1)[1]))
                for q in last[-1]["queues"]}

    def stop(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def error(self) -> str:
        return self.out.with_suffix(".err").read_text(errors="replace")[-2000:]


def consumer_ids(target: Target, group: str) -> list[str]:
    host, port = target.broker_addr().split(":")
    with BlockingClient((host, int(port))) as c:
        r = c.invoke(simple_cmd(38, consumerGroup=group), RPC_TIMEOUT_S)
    if r.code != 0 or not r.body:
        return []
    return GetConsumerListByGroupResponseBody.from_json(bytes(r.body)).consumer_id_list


NODE = shutil.which("node") is not None and (CLIENTS / "node_modules" / "ali-ons").is_dir()


@pytest.mark.parametrize("name", ["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "MACHINE_ROOM",
                                  "CONFIG", "NEARBY"])
def test_python_java_alions_split_queues(name: str, cluster: Target,
                                         java_classes: tuple[str, str], tmp_path: Path) -> None:
    if not NODE and os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.skip("node / ali-ons not installed")
    group = f"mixed_{name.lower()}_cg"
    cp, classes = java_classes
    members: list[Member] = []
    py_consumers: list[PushConsumer] = []
    py_strategy, _ = strategy(name, "py")
    try:
        py = PushConsumer(group, namesrv=cluster.namesrv, handler=lambda m: ConsumeResult.SUCCESS,
                          allocate=py_strategy, consume_from="first", **FAST).start()
        py.subscribe(TOPIC)
        py_consumers.append(py)
        _, jparam = strategy(name, "java")
        members.append(Member(["java", "-Drocketmq.client.rebalance.waitInterval=1000",
                               "-Drocketmq.client.logRoot=" + str(tmp_path), "-cp",
                               f"{cp}:{classes}", "MixedConsumer", cluster.namesrv, TOPIC, group,
                               name, jparam], tmp_path / "java.out"))
        if name == "NEARBY":  # ali-ons has no AllocateMachineRoomNearby: a second Python member
            py2 = PushConsumer(group, namesrv=cluster.namesrv,
                               handler=lambda m: ConsumeResult.SUCCESS, allocate=py_strategy,
                               consume_from="first", **FAST).start()
            py2.subscribe(TOPIC)
            py_consumers.append(py2)
        else:
            _, nparam = strategy(name, "node")
            members.append(Member(["node", str(CLIENTS / "alions_consumer.js"), cluster.namesrv,
                                   TOPIC, group, name, nparam, f"alions{os.getpid()}"],
                                  tmp_path / "node.out", cwd=CLIENTS))
        assert wait_for(lambda: all(m.cid() for m in members), 60), [m.error() for m in members]
        cids = [*(c.client_id for c in py_consumers), *(m.cid() for m in members)]

        mq_all = [MessageQueue(TOPIC, BROKER, q) for q in range(QUEUES)]

        def holdings() -> list[tuple[str, str, set[MessageQueue]]]:
            out = [(c.client_id, "py", c.assignment()) for c in py_consumers]
            out.append((str(members[0].cid()), "java", members[0].queues()))
            if len(members) > 1:
                out.append((str(members[1].cid()), "node", members[1].queues()))
            return [(cid, who, {q for q in held if q.topic == TOPIC}) for cid, who, held in out]

        def settled() -> bool:
            listed = sorted(consumer_ids(cluster, group))
            if listed != sorted(str(c) for c in cids):
                return False
            got = holdings()
            everything = set().union(*(h for _, _, h in got))
            if not sum(len(h) for _, _, h in got) == len(everything) == QUEUES:
                return False  # an overlap or a gap (for now)
            # each member holds exactly what the Java algorithm gives it for the group's list
            return all(held == set(strategy(name, who)[0].allocate(group, cid, mq_all, listed))
                       for cid, who, held in got)

        assert wait_for(settled, 60, 0.2), (
            holdings(), consumer_ids(cluster, group), [m.error() for m in members])
    finally:
        for c in py_consumers:
            c.close()
        for m in members:
            m.stop()
