"""`actormq console`'s /metrics (issue #24 part 2) against a cluster started as a user starts
it, under known traffic: parsed with prometheus_client's text-format parser, rocketmq-exporter's
names and label orders, the values checked against the admin codes; the actor system's own
figures; the front page; and the same /metrics against RocketMQ 4.9.8 itself."""

from __future__ import annotations

import os
import re
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.admin_ext import json_object, offset_table
from deploy.wire import BlockingClient
from protocol.codes import RequestCode as RC
from protocol.command import RemotingCommand
from tests.integration.e2e_helpers import create_topic_cmd, get_route, start_up_process, wait_until

pytestmark = pytest.mark.integration

TOPIC = "MetricsT"


def _console(tmp_path: Path, ns: str) -> tuple[Any, str]:
    from tests.integration.conftest import MarkedProcess

    run = MarkedProcess([sys.executable, "-m", "deploy", "console", "-n", ns, "--port", "0"],
                        tmp_path / "console", os.getcwd())  # fmt: skip
    try:
        run.wait_for("console listening on http://127.0.0.1:", 60.0)
    except BaseException:
        run.stop()
        raise
    port = re.search(r"http://127\.0\.0\.1:(\d+)/", run.out_path.read_text()).group(1)  # type: ignore[union-attr]
    return run, f"http://127.0.0.1:{port}"


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read().decode()


def _samples(text: str) -> dict[str, list[Any]]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[Any]] = {}
    for fam in text_string_to_metric_families(text):
        out.setdefault(fam.name, []).extend(fam.samples)
    return out


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[int, int]]:
    run, ns, port, _data = start_up_process(tmp_path)
    try:
        yield ns, port
    finally:
        run.stop()


def test_metrics_match_the_admin_codes_under_known_traffic(up: tuple[int, int],
                                                           tmp_path: Path) -> None:
    from actors.client import ConsumeResult, Message, Producer, PushConsumer

    ns, port = up
    namesrv = f"127.0.0.1:{ns}"
    with BlockingClient(("127.0.0.1", port)) as c:
        assert c.invoke(create_topic_cmd(TOPIC, 2), 10.0).code == 0
        assert c.invoke(create_topic_cmd("MetricsLive", 1), 10.0).code == 0
    got: set[bytes] = set()
    with Producer("metrics_pg", namesrv=namesrv) as p:
        for i in range(20):
            p.send(Message(TOPIC, b"m%d" % i))

        def handle(msgs: tuple[Any, ...]) -> ConsumeResult:
            got.update(m.body for m in msgs)
            return ConsumeResult.SUCCESS

        c = PushConsumer("metrics_cg", namesrv=namesrv, handler=handle, consume_from="first")
        c.subscribe(TOPIC, "*")
        c.start()
        deadline = time.monotonic() + 30.0
        while len(got) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        c.close()
        assert len(got) == 20
        late_begin = time.time() * 1000
        for i in range(7):  # a backlog of 7 for the (now offline) group
            p.send(Message(TOPIC, b"late%d" % i))
        late_end = time.time() * 1000
    def put_tps() -> float:  # the admin code the exporter reads producer_tps from
        with BlockingClient(("127.0.0.1", port)) as c:
            r = c.invoke(RemotingCommand.request(RC.VIEW_BROKER_STATS_DATA, {
                "statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC}), 10.0)
        return round(float(json_object(r)["statsMinute"]["tps"]), 2) if r.code == 0 else 0.0

    console, base = _console(tmp_path, namesrv)
    try:
        before = put_tps()
        scrape_begin = time.time() * 1000
        samples = _samples(_get(base + "/metrics"))
        scrape_end = time.time() * 1000
        after = put_tps()  # the stats move on sample boundaries: the scrape saw one of these
        with BlockingClient(("127.0.0.1", port)) as c:
            stats = c.invoke(RemotingCommand.request(RC.GET_CONSUME_STATS, {
                "consumerGroup": "metrics_cg", "topic": TOPIC}), 10.0)
            runtime = c.invoke(RemotingCommand.request(RC.GET_BROKER_RUNTIME_INFO), 10.0)
        page = _get(base + "/")
        topics = _get(base + "/topics")
        groups = _get(base + "/groups")
        topic = _get(f"{base}/topic/{TOPIC}")
        with Producer("metrics_live_pg", namesrv=namesrv) as live:
            live.send(Message("MetricsLive", b"live"))  # a heartbeat registers it on broker-a
            producers = _get(f"{base}/producers?topic={TOPIC}&group=metrics_live_pg")
            client_id = live.client_id
    finally:
        console.stop()

    def one(name: str, **labels: str) -> float:
        found = [s for s in samples.get(name, [])
                 if all(s.labels.get(k) == v for k, v in labels.items())]  # fmt: skip
        assert len(found) == 1, (name, labels, samples.get(name))
        return float(found[0].value)

    addr = f"127.0.0.1:{port}"
    diff = [s for s in samples["rocketmq_group_diff"] if s.labels["group"] == "metrics_cg"]
    assert len(diff) == 1 and list(diff[0].labels) == \
        ["group", "topic", "countOfOnlineConsumers", "msgModel"]  # fmt: skip
    assert diff[0].labels == {"group": "metrics_cg", "topic": TOPIC,
                              "countOfOnlineConsumers": "0", "msgModel": "1"}
    # the same figures from the admin codes (read right after the scrape, before "live")
    offsets = [o for _mq, o in offset_table(stats)]
    broker_total = sum(int(o["brokerOffset"]) for o in offsets)
    consumer_total = sum(int(o["consumerOffset"]) for o in offsets)
    assert (broker_total, consumer_total) == (27, 20)
    assert diff[0].value == broker_total - consumer_total == 7
    assert one("rocketmq_producer_offset", topic=TOPIC) == 27
    assert one("rocketmq_consumer_offset", topic=TOPIC, group="metrics_cg") == 20
    # the age of the group's first unconsumed message (one of the late ones): stored between
    # late_begin and late_end, measured between scrape_begin and scrape_end
    latency = one("rocketmq_group_get_latency_by_storetime", topic=TOPIC, group="metrics_cg")
    assert scrape_begin - late_end - 1 <= latency <= scrape_end - late_begin + 1
    table = json_object(runtime)["table"]
    assert one("rocketmq_brokeruntime_commitlog_maxoffset", brokerIP=addr) == \
        float(table["commitLogMaxOffset"])  # fmt: skip
    # published by the send actor every few seconds: what the scrape saw, or fewer
    assert 0 < one("rocketmq_brokeruntime_msg_put_total_today_now", brokerIP=addr) <= \
        float(table["msgPutTotalTodayNow"])  # fmt: skip
    tps = [s for s in samples["rocketmq_broker_tps"] if s.labels["brokerIP"] == addr]
    assert len(tps) == 1 and list(tps[0].labels) == ["cluster", "brokerIP", "broker"]
    assert one("rocketmq_producer_tps", topic=TOPIC) in (before, after)
    assert one("actormq_actor_processes", role="send") >= 1
    assert one("actormq_actor_resident_memory_bytes", role="send") > 1_000_000
    assert addr in page and "broker-a" in page
    assert re.search(rf">{TOPIC}</a></td><td>NORMAL</td><td>1</td>\s*<td>2</td><td>2</td>", topics)
    queue_row = r"<tr><td>broker-a</td><td>\d</td><td>0</td><td>(\d+)</td>"
    queue_max = [int(m) for m in re.findall(queue_row, topic)]
    assert len(queue_max) == 2 and sum(queue_max) == 27
    assert '<span id="messages-written">27</span>' in topic and ">metrics_cg</a></li>" in topic
    assert f"<td>{client_id}</td>" in producers  # the live producer's connection
    assert re.search(r">metrics_cg</a></td><td>0</td>\s*<td></td><td></td><td>[\d.]+</td>"
                     r"<td>7</td>", groups)  # fmt: skip


def test_metrics_of_rocketmq_4_9_8(reference_build: Path, tmp_path: Path) -> None:
    from deploy import reference

    with reference.reference_cluster(str(tmp_path / "ref")) as ref:
        with BlockingClient(("127.0.0.1", ref.broker_port)) as c:
            assert c.invoke(create_topic_cmd(TOPIC, 2), 10.0).code == 0
        # the broker registers the new topic with its name server a moment later
        assert wait_until(lambda: get_route(("127.0.0.1", ref.namesrv_port), TOPIC).code == 0
                          or None, 30.0)  # fmt: skip
        console, base = _console(tmp_path, ref.namesrv_addr())

        def runtime() -> list[Any] | None:  # 4.9.8 fails its runtime info until stats sample
            found = [s for s in _samples(_get(base + "/metrics")).get(
                "rocketmq_brokeruntime_commitlog_maxoffset", [])
                if s.labels["brokerIP"].endswith(f":{ref.broker_port}")]  # fmt: skip
            return found or None

        try:
            found = wait_until(runtime, 60.0, step_s=1.0)
            samples = _samples(_get(base + "/metrics"))
        finally:
            console.stop()
    addr = f"127.0.0.1:{ref.broker_port}"
    assert found is not None and len(found) == 1 and found[0].labels["des"].startswith("V4_9")
    assert any(s.labels["topic"] == TOPIC for s in samples["rocketmq_producer_offset"]), addr
