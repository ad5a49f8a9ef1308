"""Delayed messages and send-back retries delivered by ScheduleMessageService on a real broker
(spec §9.6): a name server and the real broker over TCP, short delay levels, bounded waits.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from deploy import launch
from deploy.wire import BlockingClient
from protocol.bodies import DelayOffsetSerializeWrapper
from protocol.message import decode_messages
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    create_topic_cmd,
    msg_props,
    pull_cmd,
    send_cmd,
    simple_cmd,
    start_real,
    wait_until,
)

pytestmark = pytest.mark.integration

# level 1 = 1 s; a first send-back uses level 3 (+ reconsumeTimes 0): 1 s as well
SHORT_LEVELS = "1s 2s 1s 2s 3s"


def _pull_found(cl: BlockingClient, group: str, topic: str, qid: int) -> list[Any] | None:
    resp = cl.invoke(pull_cmd(group, topic, qid, 0), RPC_TIMEOUT_S)
    if resp.code != 0:
        return None
    return decode_messages(bytes(resp.body))


def test_delayed_send_then_send_back_retry(local_cluster, tmp_path) -> None:
    cluster = start_real(
        local_cluster, messageDelayLevel=SHORT_LEVELS, storePathRootDir=str(tmp_path / "store")
    )
    topic = "SchedE2E"
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(create_topic_cmd(topic, 4), RPC_TIMEOUT_S).code == 0
        assert wait_until(
            lambda: cl.invoke(pull_cmd("probe", topic, 1, 0), RPC_TIMEOUT_S).code != 17, 10.0
        )
        props = msg_props(tags="TagD", keys="dk")
        props["DELAY"] = "1"
        t_send = time.time()
        sent = cl.invoke(send_cmd(topic, b"later", props, queue_id=1), RPC_TIMEOUT_S)
        assert sent.code == 0, sent.remark
        assert sent.ext_fields["queueId"] == "1"
        # not before the delay: an immediate pull of the real queue finds nothing
        early = cl.invoke(pull_cmd("sched_cg", topic, 1, 0), RPC_TIMEOUT_S)
        assert early.code != 0 or time.time() - t_send >= 1.0

        found = wait_until(lambda: _pull_found(cl, "sched_cg", topic, 1), 15.0, 0.05)
        t_found = time.time()
        assert found, "delayed message never delivered"
        assert t_found - t_send >= 0.95  # delivered no earlier than store time + 1 s
        (msg,) = found
        assert msg.topic == topic and msg.queue_id == 1 and bytes(msg.body) == b"later"
        assert msg.properties["DELAY"] == "1"  # Java's delivered text keeps it
        assert msg.properties["WAIT"] == "true"
        assert msg.properties["REAL_TOPIC"] == topic and msg.properties["REAL_QID"] == "1"
        assert msg.properties["TAGS"] == "TagD" and msg.reconsume_times == 0
        assert msg.store_timestamp - msg.born_timestamp >= 950

        # the consumer fails it: CONSUMER_SEND_MSG_BACK with delayLevel 0 (=> 3 + 0)
        group = "sched_cg"
        back = cl.invoke(
            simple_cmd(
                36,
                offset=msg.commit_log_offset,
                group=group,
                delayLevel=0,
                originMsgId=msg.msg_id,
                originTopic=topic,
                unitMode="false",
                maxReconsumeTimes=16,
            ),
            RPC_TIMEOUT_S,
        )
        assert back.code == 0, back.remark
        t_back = time.time()
        retry = f"%RETRY%{group}"
        got = wait_until(lambda: _pull_found(cl, group, retry, 0), 15.0, 0.05)
        assert got, "send-back retry never delivered"
        assert time.time() - t_back >= 0.95
        (again,) = got
        assert again.topic == retry and bytes(again.body) == b"later"
        assert again.reconsume_times == 1
        assert again.properties["RETRY_TOPIC"] == topic
        assert again.properties["REAL_TOPIC"] == retry
        assert again.properties["DELAY"] == "3"  # the send-back's level, kept as Java keeps it
        # mqadmin's view (GET_ALL_DELAY_OFFSET): the live table, before any 10 s persist
        live = cl.invoke(simple_cmd(45), RPC_TIMEOUT_S)
        assert live.code == 0, live.remark
        assert DelayOffsetSerializeWrapper.from_json(bytes(live.body).decode()).offset_table == {
            1: 1, 3: 1}  # fmt: skip
    launch.stop_cluster(cluster)  # clean shutdown persists delayOffset.json
    text = (tmp_path / "store" / "config" / "delayOffset.json").read_text(encoding="utf-8")
    assert DelayOffsetSerializeWrapper.from_json(text).offset_table == {1: 1, 3: 1}
