"""Long polling end to end (spec §9.3, §13 item 9, §14.7 row 4): held pulls woken by arrival,
idle pulls answered 19 after their suspend time (the 5 s sweep may add up to 5 s).

No latency assertions: the waits are bounded and the checks are about which answer comes and
whether it came before the suspend time ran out.
"""

from __future__ import annotations

import time

import pytest

from deploy.wire import BlockingClient
from protocol.message import decode_messages
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    create_topic_cmd,
    msg_props,
    pull_cmd,
    send_cmd,
    start_real,
    wait_until,
)

pytestmark = pytest.mark.integration

SUSPEND = 0x2 | 0x4  # FLAG_SUSPEND | FLAG_SUBSCRIPTION


def _ready_topic(cl: BlockingClient, topic: str) -> None:
    assert cl.invoke(create_topic_cmd(topic), RPC_TIMEOUT_S).code == 0
    ok = wait_until(lambda: cl.invoke(pull_cmd("lp_probe", topic, 0, 0),
                                      RPC_TIMEOUT_S).code != 17, 10.0, 0.05)
    assert ok, f"pull group never learned {topic}"


def test_held_pull_answered_on_arrival(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "LpArrival"
    with BlockingClient(broker_addr(cluster)) as producer, \
            BlockingClient(broker_addr(cluster)) as consumer:
        _ready_topic(producer, topic)
        assert producer.invoke(send_cmd(topic, b"first", msg_props()), RPC_TIMEOUT_S).code == 0
        held = pull_cmd("lp_cg", topic, 0, 1, sys_flag=SUSPEND, suspend_ms=15000)
        consumer.send_raw(held.encode())
        t_sent = time.monotonic()
        consumer.read_for(0.5)
        assert held.opaque not in consumer.pending, "offset == maxOffset must be held, not 19"
        props = msg_props(tags="Woken", keys="lp-key")
        assert producer.invoke(send_cmd(topic, b"second", props), RPC_TIMEOUT_S).code == 0
        resp = consumer.wait_response(held.opaque, 14.0)  # raises if not before 15 s elapsed
        waited = time.monotonic() - t_sent
    assert resp.code == 0, resp.remark
    assert resp.opaque == held.opaque
    (msg,) = decode_messages(bytes(resp.body))
    assert msg.body == b"second"
    assert msg.queue_offset == 1
    assert msg.properties["UNIQ_KEY"] == props["UNIQ_KEY"]
    assert resp.ext_fields["nextBeginOffset"] == "2"
    assert waited < 15.0


def test_held_pull_ignores_unmatched_tag_then_wakes(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "LpFilter"
    with BlockingClient(broker_addr(cluster)) as producer, \
            BlockingClient(broker_addr(cluster)) as consumer:
        _ready_topic(producer, topic)
        held = pull_cmd("lp_cg", topic, 0, 0, sys_flag=SUSPEND, suspend_ms=15000,
                        subscription="TagA")
        consumer.send_raw(held.encode())
        consumer.read_for(0.3)
        assert producer.invoke(send_cmd(topic, b"other", msg_props(tags="TagB")),
                               RPC_TIMEOUT_S).code == 0
        consumer.read_for(0.5)
        assert held.opaque not in consumer.pending, "a TagB arrival must not wake a TagA pull"
        assert producer.invoke(send_cmd(topic, b"wanted", msg_props(tags="TagA")),
                               RPC_TIMEOUT_S).code == 0
        resp = consumer.wait_response(held.opaque, 14.0)
    assert resp.code == 0, resp.remark
    assert [m.body for m in decode_messages(bytes(resp.body))] == [b"wanted"]


def test_idle_pull_returns_not_found_after_suspend_time(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "LpIdle"
    with BlockingClient(broker_addr(cluster)) as cl:
        _ready_topic(cl, topic)
        assert cl.invoke(send_cmd(topic, b"only", msg_props()), RPC_TIMEOUT_S).code == 0
        held = pull_cmd("lp_cg", topic, 0, 1, sys_flag=SUSPEND, suspend_ms=1000)
        t0 = time.monotonic()
        cl.send_raw(held.encode())
        resp = cl.wait_response(held.opaque, 15.0)
        waited = time.monotonic() - t0
    assert resp.code == 19, resp.remark
    assert resp.ext_fields["nextBeginOffset"] == "1"
    assert resp.ext_fields["maxOffset"] == "1"
    assert not bytes(resp.body)
    # Java never answers a held pull before its suspend time unless data arrives (§13 item 9)
    assert waited >= 0.9, f"answered after {waited:.2f}s, before the 1 s suspend time"
