"""The broker's VIP ("fast") channel on listenPort - 2 (spec §1.1, NettyServerConfig).

Java clients <= 4.4 send most calls to port - 2; the broker serves every code there except
PULL_MESSAGE, which falls to the default processor: code 3 " request type 11 not supported".
"""

from __future__ import annotations

import json
import time

import pytest

from deploy import launch
from deploy.wire import BlockingClient
from protocol.message import decode_messages
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    create_topic_cmd,
    heartbeat_cmd,
    msg_props,
    pull_cmd,
    send_cmd,
    simple_cmd,
    start_real,
    wait_until,
)

pytestmark = pytest.mark.integration


def test_free_port_pair_leaves_the_vip_port_free() -> None:
    port = launch.free_port_pair()
    assert port > 1026 and launch.port_is_free(port) and launch.port_is_free(port - 2)


def test_broker_reports_its_vip_port(local_cluster) -> None:
    cluster = start_real(local_cluster, listenPort="0")
    assert cluster.broker_fast_port() == cluster.broker_port() - 2


def test_fast_port_serves_all_but_pull(local_cluster) -> None:
    # listenPort 0: the launcher picks P with P - 2 free, so the VIP channel gets P - 2
    cluster = start_real(local_cluster, listenPort="0")
    port = cluster.broker_port()
    assert launch.port_is_free(port - 2) is False  # the broker listens there
    fast = ("127.0.0.1", port - 2)
    main = ("127.0.0.1", port)
    topic, group = "VipTopic", "vip_cg"
    with BlockingClient(main) as cl:
        _exercise(BlockingClient(fast), cl, topic, group)

        # closing the VIP connection unregisters its consumer (CONN_CLOSED reached the cores)
        def left() -> list[str] | None:
            r = cl.invoke(simple_cmd(38, consumerGroup=group), RPC_TIMEOUT_S)
            return json.loads(bytes(r.body))["consumerIdList"] if r.code == 0 else None

        assert wait_until(lambda: left() == ["10.0.0.8@MAIN"], 10.0), left()


def _exercise(vip: BlockingClient, cl: BlockingClient, topic: str, group: str) -> None:
    """Admin, send, offsets and heartbeat over VIP; pull refused there, served on main."""
    with vip:
        created = vip.invoke(create_topic_cmd(topic, 2), RPC_TIMEOUT_S)  # admin over VIP
        assert created.code == 0, created.remark
        assert wait_until(
            lambda: cl.invoke(pull_cmd("probe", topic, 0, 0), RPC_TIMEOUT_S).code != 17, 10.0)
        for i in range(3):
            sent = vip.invoke(send_cmd(topic, b"vip%d" % i, msg_props(tags="T"), code=310),
                              RPC_TIMEOUT_S)
            assert sent.code == 0, sent.remark
            assert sent.ext_fields["queueOffset"] == str(i)
        # PULL_MESSAGE is not registered on the fast port: the default processor says so
        req = pull_cmd(group, topic, 0, 0)
        refused = vip.invoke(req, RPC_TIMEOUT_S)
        assert refused.code == 3
        assert refused.remark == " request type 11 not supported"
        assert refused.opaque == req.opaque and refused.version == 409
        # ... while the main port serves it
        pulled = cl.invoke(pull_cmd(group, topic, 0, 0), RPC_TIMEOUT_S)
        assert pulled.code == 0, pulled.remark
        assert [m.body for m in decode_messages(bytes(pulled.body))] == [b"vip0", b"vip1",
                                                                         b"vip2"]
        # offsets over VIP
        upd = vip.invoke(simple_cmd(15, consumerGroup=group, topic=topic, queueId=0,
                                    commitOffset=2), RPC_TIMEOUT_S)
        assert upd.code == 0, upd.remark

        def offset() -> str | None:
            r = vip.invoke(simple_cmd(14, consumerGroup=group, topic=topic, queueId=0),
                           RPC_TIMEOUT_S)
            return r.ext_fields.get("offset") if r.code == 0 else None

        assert wait_until(lambda: offset() == "2", 10.0), offset()
        mx = vip.invoke(simple_cmd(30, topic=topic, queueId=0), RPC_TIMEOUT_S)
        assert mx.code == 0 and mx.ext_fields["offset"] == "3"
        # heartbeat over VIP registers the consumer; the list is served there too
        hb = vip.invoke(heartbeat_cmd("10.0.0.9@VIP", group, {topic: "*"}), RPC_TIMEOUT_S)
        assert hb.code == 0, hb.remark

        def members() -> list[str] | None:
            r = vip.invoke(simple_cmd(38, consumerGroup=group), RPC_TIMEOUT_S)
            return json.loads(bytes(r.body))["consumerIdList"] if r.code == 0 else None

        assert wait_until(lambda: members() == ["10.0.0.9@VIP"], 10.0), members()
        # a second consumer on the main port: the VIP connection gets the oneway notice
        vip.read_for(0.2)
        vip.requests.clear()
        assert cl.invoke(heartbeat_cmd("10.0.0.8@MAIN", group, {topic: "*"}),
                         RPC_TIMEOUT_S).code == 0
        deadline = time.monotonic() + 10
        while not vip.requests and time.monotonic() < deadline:
            vip.read_for(0.2)
        assert [r.code for r in vip.requests][:1] == [40]
