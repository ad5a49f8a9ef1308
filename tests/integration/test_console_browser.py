"""`actormq console` in a real browser (issue #24): Debian's chromium, headless, driven by
chromium-driver through selenium, over a cluster started as a user starts it with real traffic
(a producer, an online PushConsumer, a traced send, a dead letter). Every page is opened and
screenshotted (build/screenshots/console/); the numbers on the pages are checked against the
admin codes; the actions (create, update, send, delete a topic; reset a group by time; skip a
backlog; resend a message and a dead letter) are checked by their effect on the cluster and on
the consumer's handler. Also: the console's token refuses a cross-site post, a body of
`<script>` shows as text, and the pages against RocketMQ 4.9.8 itself."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.admin_ext import json_object, offset_table
from deploy.console.metrics import status_table
from deploy.wire import BlockingClient
from protocol.acl import sign_ext
from protocol.codes import RequestCode as RC
from protocol.command import RemotingCommand
from protocol.message import decode_offset_msg_id
from tests.integration.browser import Browser, start_console
from tests.integration.e2e_helpers import create_topic_cmd, get_route, start_up_process, wait_until

pytestmark = pytest.mark.integration

TOPIC = "BrowserT"
GROUP = "browser_cg"
IDLE = "browser_idle_cg"
XSS = b"<script>alert(1)</script>"


def _admin(port: int, code: int, ext: dict[str, Any] | None = None, body: bytes = b""
           ) -> RemotingCommand:  # fmt: skip
    fields = {k: str(v) for k, v in (ext or {}).items()}
    with BlockingClient(("127.0.0.1", port)) as c:
        return c.invoke(RemotingCommand.request(code, fields or None, body), 10.0)


def _group_offsets(port: int, group: str) -> tuple[int, int]:
    r = _admin(port, RC.GET_CONSUME_STATS, {"consumerGroup": group, "topic": TOPIC})
    offs = [o for _mq, o in offset_table(r)] if r.code == 0 else []
    return (sum(int(o["brokerOffset"]) for o in offs),
            sum(int(o["consumerOffset"]) for o in offs))


def _written(port: int, topic: str) -> int:
    r = _admin(port, RC.GET_TOPIC_STATS_INFO, {"topic": topic})
    return sum(int(o["maxOffset"]) for _mq, o in offset_table(r)) if r.code == 0 else -1


def _local(ms: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ms / 1000))


class Traffic:
    """A producer group's sends and an online PushConsumer recording what its handler sees."""

    def __init__(self, namesrv: str) -> None:
        from actors.client import ConsumeResult, Message, Producer, PushConsumer

        self.seen: list[Any] = []
        self.started_ms = time.time() * 1000 - 1000
        with Producer("browser_pg", namesrv=namesrv) as p:
            for i in range(20):
                p.send(Message(TOPIC, b"hello %d" % i, tags="TagA", keys=f"k{i}"))
            p.send(Message(TOPIC, XSS, tags="TagX", keys="xss"))
            p.send(Message(TOPIC, b'{"a": 1, "b": [1, 2]}', keys="json1"))

        def handle(msgs: tuple[Any, ...]) -> ConsumeResult:
            self.seen.extend(msgs)
            return ConsumeResult.SUCCESS

        self.consumer = PushConsumer(GROUP, namesrv=namesrv, handler=handle, consume_from="first")
        self.consumer.subscribe(TOPIC, "*")
        self.consumer.start()
        self.traced = Producer("browser_traced_pg", namesrv=namesrv, enable_trace=True)
        self.traced.start()

    def bodies(self) -> list[bytes]:
        return [bytes(m.body) for m in list(self.seen)]

    def close(self) -> None:
        self.consumer.close()
        self.traced.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, int, Traffic]]:
    run, ns, port, _data = start_up_process(tmp_path, traceTopicEnable="true")
    traffic: Traffic | None = None
    try:
        assert _admin(port, RC.UPDATE_AND_CREATE_TOPIC, dict(create_topic_cmd(TOPIC, 2).ext_fields
                                                             or {})).code == 0  # fmt: skip
        assert wait_until(lambda: get_route(("127.0.0.1", ns), TOPIC).code == 0 or None, 30.0)
        traffic = Traffic(f"127.0.0.1:{ns}")
        assert wait_until(lambda: len(traffic.seen) >= 22 or None, 60.0)  # type: ignore[union-attr]
        yield f"127.0.0.1:{ns}", port, traffic
    finally:
        if traffic is not None:
            traffic.close()
        run.stop()


@pytest.fixture
def browser_for(tmp_path: Path) -> Iterator[Any]:
    opened: list[Browser] = []

    def make(base: str) -> Browser:
        b = Browser(base, tmp_path / f"chromium-{len(opened)}")
        opened.append(b)
        return b

    try:
        yield make
    finally:
        for b in opened:
            b.close()


def test_every_page_in_a_browser(cluster: tuple[str, int, Traffic], browser_for: Any,
                                 tmp_path: Path) -> None:  # fmt: skip
    namesrv, port, traffic = cluster
    console, base = start_console(tmp_path, namesrv, "--sample-interval", "1")
    try:
        _pages(browser_for(base), base, namesrv, port, traffic)
    finally:
        console.stop()


def _pages(b: Browser, base: str, namesrv: str, port: int, traffic: Traffic) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    # the front page: the broker, and the charts once the sampler has two points
    b.open("/")
    assert f"127.0.0.1:{port}" in b.text("table#brokers") and "broker-a" in b.text("table#brokers")

    def charted() -> bool:
        b.open("/")
        return bool(b.all("figure#chart-tps-in svg polyline"))

    assert wait_until(charted, 30.0, step_s=0.2), "no chart was drawn"
    b.screenshot("cluster")

    # topics: the list, its filter and sorting
    b.open("/topics")
    box = b.css("input.filter[data-for=topics]")
    box.send_keys(TOPIC)
    shown = [r for r in b.all("table#topics tbody tr") if r.is_displayed()]
    assert [r.find_element("css selector", "td").text for r in shown] == [TOPIC]
    header = b.all("table#topics thead th")[0]
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    b.screenshot("topics")

    # one topic: its written total is the admin code's
    b.open(f"/topic/{TOPIC}", "topic")
    assert int(b.text("#messages-written")) == _written(port, TOPIC) == 22
    assert GROUP in b.text("ul#groups")

    # create, update, test-send and delete a topic through the forms
    b.open("/topics")
    b.css("details.form summary").click()
    flash = b.submit("topic-create", {"topic": "BrowserNew", "read_queues": "3",
                                      "write_queues": "3"})  # fmt: skip
    assert "written to broker-a" in flash, flash
    table = json_object(_admin(port, RC.GET_ALL_TOPIC_CONFIG))["topicConfigTable"]
    assert table["BrowserNew"]["writeQueueNums"] == 3
    flash = b.submit("topic-update", {"write_queues": "2", "read_queues": "2"})
    assert "written" in flash, flash
    table = json_object(_admin(port, RC.GET_ALL_TOPIC_CONFIG))["topicConfigTable"]
    assert table["BrowserNew"]["writeQueueNums"] == 2
    flash = b.submit("topic-send", {"body": "from the browser", "keys": "bk"})
    assert flash.startswith("SEND_OK"), flash
    assert _written(port, "BrowserNew") == 1
    flash = b.submit("topic-delete", accept=True)
    assert "deleted" in flash, flash
    assert wait_until(lambda: get_route(("127.0.0.1", int(namesrv.split(":")[1])),
                                        "BrowserNew").code == 17 or None, 30.0)  # fmt: skip

    # groups: the lag on the list and on the group's page is the admin code's
    def caught_up() -> bool:
        broker_offset, consumer_offset = _group_offsets(port, GROUP)
        return broker_offset == consumer_offset

    assert wait_until(caught_up, 30.0)
    b.open("/groups", "groups")
    row = next(r for r in b.all("table#groups tbody tr")
               if r.find_element("css selector", "td").text == GROUP)  # fmt: skip
    cells = [c.text for c in row.find_elements("css selector", "td")]
    assert cells[1] == "1" and cells[5] == "0", cells
    def lag_charted() -> bool:  # one line per queue of the table, once sampled twice
        b.open(f"/group/{GROUP}")
        lines = b.all("figure#chart-lag svg polyline")
        return bool(lines) and len(lines) == len(b.all("table#group-queues tbody tr"))

    assert wait_until(lag_charted, 30.0, step_s=0.2), b.text("main")
    b.screenshot("group")
    broker_off, consumer_off = _group_offsets(port, GROUP)
    assert int(b.text("#group-lag")) == broker_off - consumer_off == 0
    assert traffic.consumer.client_id in b.text("table#connections")
    b.follow("table#connections a")
    assert "subscriptionSet" in b.text("pre#running-info") or "properties" in \
        b.text("pre#running-info")  # fmt: skip
    b.screenshot("client")

    # reset the group to before the first message: the online consumer sees everything again
    b.open(f"/group/{GROUP}")
    before = len(traffic.seen)
    when = b.css("form#group-reset input[name=time]")
    b.driver.execute_script("arguments[0].value = arguments[1]", when, _local(traffic.started_ms))
    flash = b.submit("group-reset", {"topic": TOPIC})
    assert f"reset on {TOPIC}" in flash, flash
    assert wait_until(lambda: len(traffic.seen) >= before + 22 or None, 60.0), \
        (before, len(traffic.seen))  # fmt: skip

    # skip the backlog of a group that consumed nothing
    assert _admin(port, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                  b'{"groupName":"%s","consumeEnable":true}' % IDLE.encode()).code == 0
    for qid in (0, 1):
        assert _admin(port, RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": IDLE, "topic": TOPIC,
                                                        "queueId": qid, "commitOffset": 0}
                      ).code == 0  # fmt: skip
    b.open(f"/group/{IDLE}")
    assert int(b.text("#group-lag")) == 22
    flash = b.submit("group-skip", accept=True)
    assert "skipped its backlog" in flash, flash
    assert _group_offsets(port, IDLE) == (22, 22)

    # messages: by key (a <script> body shows as text), by time, one message as JSON, resend
    b.open(f"/messages?topic={TOPIC}&by=key&key=xss", "messages-by-key")
    cell = b.css("table#messages td.body")
    assert cell.text == XSS.decode()
    try:
        b.driver.switch_to.alert.dismiss()
        raise AssertionError("the body ran as a script")
    except NoAlertPresentException:
        pass
    b.open(f"/messages?topic={TOPIC}&by=time")
    assert len(b.all("table#messages tbody tr")) == _written(port, TOPIC) == 22
    b.screenshot("messages")
    b.open(f"/messages?topic={TOPIC}&by=key&key=json1")
    b.follow("table#messages a")
    assert '"a": 1' in b.text("pre#body") and "json" in b.text("h2 + p.kinds a.on")
    b.screenshot("message")
    json_msg = next(m for m in traffic.seen if bytes(m.body) == b'{"a": 1, "b": [1, 2]}')
    b.open(f"/message?topic={TOPIC}&msgId={json_msg.msg_id}")  # the client's id (UNIQ_KEY)
    assert json_msg.offset_msg_id in b.text("table#message"), b.text("main")
    count = traffic.bodies().count(b'{"a": 1, "b": [1, 2]}')
    flash = b.submit("message-resend", {"group": GROUP})
    assert "CR_SUCCESS" in flash, flash
    assert traffic.bodies().count(b'{"a": 1, "b": [1, 2]}') == count + 1

    # a dead letter: sent back with delay level -1, listed on the group's DLQ page, resent
    hello = next(m for m in traffic.seen if bytes(m.body) == b"hello 3")
    back = _admin(port, RC.CONSUMER_SEND_MSG_BACK, {
        "offset": decode_offset_msg_id(hello.offset_msg_id)[2], "group": GROUP, "delayLevel": -1,
        "originMsgId": hello.msg_id, "originTopic": TOPIC, "unitMode": "false",
        "maxReconsumeTimes": 16})  # fmt: skip
    assert back.code == 0, back.remark

    def dead_letter() -> bool:
        b.open(f"/dlq?group={GROUP}")
        return bool(b.all("#dlq-messages")) and b.text("#dlq-messages") == "1"

    assert wait_until(dead_letter, 30.0, step_s=0.2), b.text("main")
    assert not b.all("form#dlq-readable")  # 4.9 makes a DLQ readable (perm 6), as we do
    assert len(b.all("table#messages tbody tr")) == 1
    b.screenshot("dlq")
    b.follow("table#messages a")
    count = traffic.bodies().count(b"hello 3")
    flash = b.submit("message-resend", {"group": GROUP})
    assert "CR_SUCCESS" in flash, flash
    assert traffic.bodies().count(b"hello 3") == count + 1

    # message trace of a traced send; the producers of its group
    from actors.client import Message

    sent = traffic.traced.send(Message(TOPIC, b"traced"))

    def traced() -> bool:
        b.open(f"/trace?msgId={sent.msg_id}")
        return any(r.text.startswith("Pub") for r in b.all("table#trace tbody tr"))

    assert wait_until(traced, 60.0, step_s=0.2), "no Pub record"
    b.screenshot("trace")
    b.open(f"/producers?topic={TOPIC}&group=browser_traced_pg", "producers")
    assert traffic.traced.client_id in b.text("table#producers")

    # /metrics: the online consumer's own figures (its running info's statusTable) and the
    # actor channels' depth
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(base + "/metrics", timeout=60) as r:
        fams = {f.name: f.samples for f in text_string_to_metric_families(r.read().decode())}
    status = status_table(bytes(_admin(port, RC.GET_CONSUMER_RUNNING_INFO, {
        "consumerGroup": GROUP, "clientId": traffic.consumer.client_id,
        "jstackEnable": "false"}).body).decode())[TOPIC]  # fmt: skip

    def client(name: str) -> list[float]:
        return [s.value for s in fams[name] if s.labels["clientId"] ==
                traffic.consumer.client_id and s.labels["topic"] == TOPIC
                and s.labels["group"] == GROUP]  # fmt: skip

    assert client("rocketmq_client_consume_fail_msg_count") == [status["consumeFailedMsgs"]] \
        == [0]  # fmt: skip
    for name in ("rocketmq_client_consume_ok_msg_tps", "rocketmq_client_consume_rt",
                 "rocketmq_client_consumer_pull_rt", "rocketmq_client_consumer_pull_tps",
                 "rocketmq_client_consume_fail_msg_tps"):
        assert len(client(name)) == 1 and client(name)[0] >= 0, name
    depth = {s.labels["role"]: s.value for s in fams["actormq_actor_channel_queue_bytes"]}
    assert "send" in depth and depth["send"] >= 0, depth

    # ACL off; an error on the page, no trace; a post without the token refused
    b.open("/acl", "acl")
    assert "ACL is off" in b.text("#acl-off")
    b.open("/topic/NoSuchTopic")
    assert "TOPIC_NOT_EXIST" in b.text("p.error") and "Traceback" not in b.driver.page_source
    # an id that names an address outside the cluster is never connected to
    stranger = "7F000001" + "00000001" + "0000000000000000"  # 127.0.0.1:1, offset 0
    b.open(f"/message?topic={TOPIC}&msgId={stranger}")
    assert f"no message {stranger}" in b.text("p.error")
    with urllib.request.urlopen(base + "/topics", timeout=30) as r:
        assert r.headers["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
    rebound = urllib.request.Request(base + "/topics", headers={"Host": "rebound.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(rebound, timeout=30)  # DNS rebinding: a name not loopback's
    assert refused.value.code == 400
    b.open("/topics")
    token = b.css("input[name=csrf_token]").get_attribute("value")
    other_site = urllib.request.Request(base + "/topics", urllib.parse.urlencode({
        "topic": "CrossSite", "read_queues": "1", "write_queues": "1", "perm": "6",
        "csrf_token": token}).encode(), headers={"Origin": "http://evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(other_site, timeout=30)  # the right token, another origin
    assert refused.value.code == 403
    for token in (None, "forged"):
        data = {"topic": "CrossSite", "read_queues": "1", "write_queues": "1", "perm": "6"}
        if token:
            data["csrf_token"] = token
        req = urllib.request.Request(base + "/topics", urllib.parse.urlencode(data).encode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=30)
        assert refused.value.code == 403
    assert "CrossSite" not in json_object(_admin(port, RC.GET_ALL_TOPIC_CONFIG))["topicConfigTable"]


def test_console_pages_against_rocketmq_4_9_8(reference_build: Path, tmp_path: Path,
                                              browser_for: Any) -> None:  # fmt: skip
    from deploy import reference

    with reference.reference_cluster(str(tmp_path / "ref")) as ref:
        assert _admin(ref.broker_port, RC.UPDATE_AND_CREATE_TOPIC,
                      dict(create_topic_cmd(TOPIC, 2).ext_fields or {})).code == 0  # fmt: skip
        assert wait_until(lambda: get_route(("127.0.0.1", ref.namesrv_port), TOPIC).code == 0
                          or None, 30.0)  # fmt: skip
        console, base = start_console(tmp_path, ref.namesrv_addr(), "--sample-interval", "0")
        try:
            b = browser_for(base)

            def versioned() -> bool:  # 4.9.8 fails its runtime info until its stats sample
                b.open("/")
                return "V4_9_8" in b.text("table#brokers")

            assert wait_until(versioned, 60.0, step_s=0.2), b.text("main")
            b.screenshot("reference-cluster")
            b.open("/topics", "reference-topics")
            assert TOPIC in b.text("table#topics")
            b.open(f"/topic/{TOPIC}", "reference-topic")
            assert len(b.all("table#queues tbody tr")) == 2
            b.open("/groups", "reference-groups")
            assert "Traceback" not in b.driver.page_source
            b.open("/acl", "reference-acl")
            assert "ACL is off" in b.text("#acl-off")
            b.open(f"/messages?topic={TOPIC}&by=time", "reference-messages")
            assert not b.all("p.error")
        finally:
            console.stop()


def test_console_with_acl_signs_and_manages_accounts(tmp_path: Path, browser_for: Any) -> None:
    """`up` with ACL serves its console signed with the admin keys it was given: the ACL page
    lists the accounts (never a secret key), an account created and deleted through its forms
    reaches the file; a console without keys shows the refusal on the page."""
    from tests.integration.test_acl_broker import ACL, ADMIN_ENV

    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    run, ns, port, _data = start_up_process(tmp_path, ADMIN_ENV, console_port=0,
                                            aclEnable="true", rocketmqHome=str(home))
    unsigned = None
    try:
        admins_only = ((("subscriber1", "subSecret1"), 1), (("adminKey1", "adminSecret1"), 0))
        for keys, code in admins_only:  # 1: SYSTEM_ERROR with the AclException remark
            ext: dict[str, str] = {}
            sign_ext(ext, b"", *keys)
            with BlockingClient(("127.0.0.1", port)) as c:  # the accounts: admins only
                got = c.invoke(RemotingCommand.request(RC.GET_BROKER_CLUSTER_ACL_CONFIG, ext),
                               10.0)  # fmt: skip
            assert got.code == code, (keys, got.code, got.remark)
            assert b"subSecret1" not in bytes(got.body or b"")
        run.wait_for("console listening on http://", 60.0)
        found = re.search(r"console listening on (http://127\.0\.0\.1:\d+)/",
                          run.out_path.read_text())  # fmt: skip
        assert found is not None, run.out_path.read_text()
        b = browser_for(found.group(1))
        b.open("/acl", "acl-on")
        assert "ACL is on for broker-a" in b.text("#acl-on")
        accounts = b.text("table#accounts")
        assert "adminKey1" in accounts and "subscriber1" in accounts
        assert "adminSecret1" not in b.driver.page_source and "subSecret1" not in \
            b.driver.page_source  # fmt: skip
        assert "10.10.103.*" in b.text("#global-white")
        flash = b.submit("acl-save", {"access_key": "browserKey1", "secret_key": "browserSec1",
                                      "topic_perms": "BrowserT=PUB|SUB"})  # fmt: skip
        assert "account browserKey1 written on broker-a" in flash, flash
        text = (home / "conf" / "plain_acl.yml").read_text()
        assert "browserKey1" in text and "BrowserT=PUB|SUB" in text
        assert "browserKey1" in b.text("table#accounts")
        row = next(r for r in b.all("table#accounts tbody tr") if "browserKey1" in r.text)
        row.find_element("css selector", "button").click()
        b.driver.switch_to.alert.accept()
        acl_file = home / "conf" / "plain_acl.yml"
        assert wait_until(lambda: "browserKey1" not in acl_file.read_text(), 30.0, step_s=0.2)
        unsigned, base = start_console(tmp_path, f"127.0.0.1:{ns}", "--sample-interval", "0")
        b2 = browser_for(base)
        b2.open("/acl", "acl-unsigned")
        assert "not read" in b2.text("p.error") and "Traceback" not in b2.driver.page_source
    finally:
        if unsigned is not None:
            unsigned.stop()
        run.stop()
