"""Allocation strategies against the real Java classes (RocketMQ 4.9.8 client jars).

tests/clients/AllocateGolden.java runs AllocateMessageQueueAveragely, ...ByCircle,
...ConsistentHash, ...ByMachineRoom and AllocateMachineRoomNearby over the same generated
shapes; every consumer's share must be the same queues in the same order.
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.client.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    QueueLike,
    java_sort_key,
    java_str_key,
)

JAVA_SRC = Path(__file__).resolve().parents[2] / "clients" / "AllocateGolden.java"


@dataclass(frozen=True)
class MQ:
    topic: str
    broker_name: str
    queue_id: int


class Rooms:
    """The resolver AllocateGolden.java uses: the text before the first '@'."""

    def broker_deploy_in(self, mq: QueueLike) -> str:
        return mq.broker_name.split("@", 1)[0]

    def consumer_deploy_in(self, cid: str) -> str:
        return cid.split("@", 1)[0]


def simple(name: str, param: str) -> AllocateMessageQueueStrategy:
    if name == "AVG":
        return AllocateMessageQueueAveragely()
    if name == "AVG_BY_CIRCLE":
        return AllocateMessageQueueAveragelyByCircle()
    return AllocateMessageQueueConsistentHash(int(param))


def strategy_for(name: str, param: str) -> AllocateMessageQueueStrategy:
    if name == "MACHINE_ROOM":
        return AllocateMessageQueueByMachineRoom(param.split(","))
    if name == "NEARBY":
        inner, _, p = param.partition(":")
        return AllocateMachineRoomNearby(simple(inner, p), Rooms())
    return simple(name, param)


def gen_cases(seed: int, count: int) -> list[tuple[str, str, list[MQ], list[str]]]:
    rnd = random.Random(seed)
    cases: list[tuple[str, str, list[MQ], list[str]]] = []
    rooms = ["hz", "sh", "bj", "sz"]
    for _ in range(count):
        n_topics = rnd.choice([1, 1, 1, 2, 3])
        n_brokers = rnd.choice([1, 1, 2, 3, 4])
        roomed = rnd.random() < 0.5
        brokers = []
        for b in range(n_brokers):
            name = f"broker-{chr(97 + b)}"
            if roomed:
                name = f"{rnd.choice(rooms)}@{name}"
            elif rnd.random() < 0.2:
                name = rnd.choice(["x@y@z", "@lead", "trail@", name.upper()])
            brokers.append(name)
        mqs: list[MQ] = []
        for t in range(n_topics):
            topic = rnd.choice(["Orders", "orders", "TopicTest", "%RETRY%cg", "T-1"]) + str(t)
            for b in brokers:
                for q in range(rnd.randint(1, 16)):
                    mqs.append(MQ(topic, b, q))
        n_cids = rnd.randint(1, 13)
        cids = sorted({f"{rnd.choice(rooms)}@10.0.{rnd.randint(0, 3)}.{rnd.randint(1, 250)}"
                       f"@{rnd.randint(1, 99999)}" for _ in range(n_cids)}, key=java_str_key)
        if rnd.random() < 0.7:
            mqs.sort(key=java_sort_key)  # what RebalanceImpl hands the strategy
        else:
            rnd.shuffle(mqs)
        kinds = [("AVG", "0"), ("AVG_BY_CIRCLE", "0"),
                 ("CONSISTENT_HASH", str(rnd.choice([10, 10, 1, 3, 0, 50]))),
                 ("MACHINE_ROOM", ",".join(rnd.sample(rooms, rnd.randint(1, 3)))),
                 ("NEARBY", rnd.choice(["AVG:0", "AVG_BY_CIRCLE:0", "CONSISTENT_HASH:10"]))]
        for name, param in kinds:
            cases.append((name, param, mqs, cids))
    return cases


@pytest.fixture(scope="module")
def golden_classes(reference_build: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    from deploy.reference import client_classpath

    cp = client_classpath()
    out = tmp_path_factory.mktemp("golden")
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(JAVA_SRC)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    return cp, str(out)


def run_java(classes: tuple[str, str], cases: list[tuple[str, str, list[MQ], list[str]]]
             ) -> list[list[list[int] | str]]:
    cp, out = classes
    lines = []
    for name, param, mqs, cids in cases:
        qs = ";".join(f"{m.topic},{m.broker_name},{m.queue_id}" for m in mqs)
        lines.append(f"{name}\t{param}\t{qs}\t{';'.join(cids)}")
    res = subprocess.run(["java", "-cp", f"{cp}:{out}", "AllocateGolden"],
                         input="\n".join(lines).encode(), capture_output=True, timeout=120,
                         check=False)
    assert res.returncode == 0, res.stderr.decode()[-3000:]
    rows = res.stdout.decode().splitlines()
    assert len(rows) == len(cases)
    return [[share if share == "E" else [int(i) for i in share.split(",") if i]
             for share in row.split("|")] for row in rows]


def test_strategies_match_java(golden_classes: tuple[str, str]) -> None:
    cases = gen_cases(20261122, 160)
    java = run_java(golden_classes, cases)
    mismatches = []
    covered = 0
    for (name, param, mqs, cids), want in zip(cases, java, strict=True):
        strategy = strategy_for(name, param)
        index = {id(m): i for i, m in enumerate(mqs)}
        got: list[list[int] | str] = []
        for cid in cids:
            try:
                got.append([index[id(q)] for q in strategy.allocate("golden", cid, mqs, cids)])
            except ValueError:
                got.append("E")
        if got != want:
            mismatches.append((name, param, len(mqs), len(cids), got, want))
        if name in ("AVG", "AVG_BY_CIRCLE") or (name == "CONSISTENT_HASH" and param != "0"):
            # these split every queue exactly once: no overlap, no gap (a ring with no
            # virtual node routes nothing, in Java too)
            flat = sorted(i for share in got for i in share)  # type: ignore[union-attr]
            assert flat == list(range(len(mqs))), (name, param)
            covered += 1
    assert not mismatches, mismatches[:3]
    assert covered >= 2 * 160
