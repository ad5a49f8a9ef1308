"""The producer's and the instance's pure cores: fault strategy, publish info, route table,
heartbeat data, selectors, validators, records, channel records, broker-request routing."""

from __future__ import annotations

import dataclasses
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.client import client_channel as ch
from actors.client.client_remoting_processor import Target, route
from actors.client.errors import MessageValidationError
from actors.client.latency_fault_tolerance import MQFaultStrategy
from actors.client.message_queue_selector import hash_index, java_hash
from actors.client.mq_client_instance import MQClientInstance, TopicRouteTable, default_route_for
from actors.client.records import Message, MessageQueue, SendStatus
from actors.client.topic_publish_info import TopicPublishInfo
from actors.client.validators import check_batch, check_group, check_message, check_topic
from actors.runtime.channel import KindDecoder
from protocol.bodies import BrokerData, ConsumerData, QueueData, SubscriptionData, TopicRouteData
from protocol.codes import RequestCode
from protocol.command import RemotingCommand


def _route(*brokers: tuple[str, int, int, dict[int, str]]) -> TopicRouteData:
    """brokers: (name, queue nums, perm, {id: addr})."""
    return TopicRouteData(
        [QueueData(name, n, n, perm) for name, n, perm, _ in brokers],
        [BrokerData("C", name, dict(addrs)) for name, _, _, addrs in brokers])


def test_publish_info_sorted_masters_only_writable() -> None:
    r = _route(("b", 2, 6, {0: "b:1"}), ("a", 2, 6, {0: "a:1"}), ("c", 3, 6, {1: "c:2"}),
               ("d", 2, 4, {0: "d:1"}))
    info = TopicPublishInfo.from_route("T", r)
    assert [(q.broker_name, q.queue_id) for q in info.message_queue_list] == [
        ("a", 0), ("a", 1), ("b", 0), ("b", 1)]  # c has no master, d is read-only


def test_publish_info_order_topic_conf() -> None:
    r = _route(("a", 8, 6, {0: "a:1"}))
    r.order_topic_conf = "b:2;a:1"
    info = TopicPublishInfo.from_route("T", r)
    assert info.order_topic and [(q.broker_name, q.queue_id)
                                 for q in info.message_queue_list] == [("b", 0), ("b", 1),
                                                                       ("a", 0)]


def test_select_avoids_last_broker() -> None:
    info = TopicPublishInfo.from_route("T", _route(("a", 2, 6, {0: "a:1"}),
                                                   ("b", 2, 6, {0: "b:1"})))
    for _ in range(20):
        assert info.select_one_message_queue("a").broker_name == "b"
    one = TopicPublishInfo.from_route("T", _route(("a", 2, 6, {0: "a:1"})))
    assert one.select_one_message_queue("a").broker_name == "a"  # nothing else to pick


def test_fault_durations_follow_java_table() -> None:
    d = MQFaultStrategy.compute_not_available_duration
    assert [d(x) for x in (0, 49, 50, 100, 549, 550, 999, 1000, 2000, 3000, 14999, 15000)] == [
        0, 0, 0, 0, 0, 30000, 30000, 60000, 120000, 180000, 180000, 600000]


def test_fault_strategy_skips_isolated_broker_until_due() -> None:
    info = TopicPublishInfo.from_route("T", _route(("a", 2, 6, {0: "a:1"}),
                                                   ("b", 2, 6, {0: "b:1"})))
    fs = MQFaultStrategy(True)
    # isolation counts as a 30 000 ms latency, which is past latencyMax's last step: 10 min
    fs.update_fault_item("b", 5, True, now_ms=1000)
    assert {fs.select_one_message_queue(info, None, 2000).broker_name
            for _ in range(10)} == {"a"}
    got = {fs.select_one_message_queue(info, None, 601000).broker_name for _ in range(10)}
    assert got == {"a", "b"}
    fs.update_fault_item("a", 5, True, now_ms=700000)
    fs.update_fault_item("b", 2000, False, now_ms=700000)  # both out: 10 min / 120 s
    assert fs.tolerance.pick_one_at_least(701000) == "a"  # the lower latency sorts first
    assert fs.select_one_message_queue(info, None, 701000).broker_name == "a"


def test_fault_strategy_disabled_is_round_robin() -> None:
    info = TopicPublishInfo.from_route("T", _route(("a", 2, 6, {0: "a:1"})))
    fs = MQFaultStrategy(False)
    fs.update_fault_item("a", 99999, True, now_ms=0)
    assert fs.tolerance.items == {}
    assert len({fs.select_one_message_queue(info, None, 1).queue_id for _ in range(4)}) == 2


def test_route_table_find_broker_in_subscribe() -> None:
    t = TopicRouteTable()
    assert t.update("T", _route(("a", 4, 6, {0: "m:1", 1: "s:1"}), ("b", 4, 6, {2: "s2:1"})))
    assert not t.update("T", _route(("a", 4, 6, {1: "s:1", 0: "m:1"}),
                                    ("b", 4, 6, {2: "s2:1"})))  # same route, other order
    r = t.find_broker_address_in_subscribe("a", 1, False)
    assert r is not None and (r.broker_addr, r.slave) == ("s:1", True)
    r = t.find_broker_address_in_subscribe("a", 0, True)
    assert r is not None and (r.broker_addr, r.slave) == ("m:1", False)
    r = t.find_broker_address_in_subscribe("b", 1, False)  # id 1 missing: id+1 = 2
    assert r is not None and (r.broker_addr, r.slave) == ("s2:1", True)
    assert t.find_broker_address_in_subscribe("b", 0, True) is None
    r = t.find_broker_address_in_subscribe("b", 0, False)  # any address
    assert r is not None and r.broker_addr == "s2:1"
    assert t.find_broker_address_in_publish("a") == "m:1"
    assert t.find_broker_address_in_publish("b") is None
    assert t.subscribe_queues("T")[:2] == [MessageQueue("T", "a", 0), MessageQueue("T", "a", 1)]


def test_route_table_cleans_offline_brokers() -> None:
    t = TopicRouteTable()
    t.update("T", _route(("a", 4, 6, {0: "a:1"}), ("b", 4, 6, {0: "b:1"})))
    t.update("T", _route(("a", 4, 6, {0: "a:1"})))
    assert t.broker_addrs() == {"a:1", "b:1"}  # kept until cleanOfflineBroker
    assert t.clean_offline_brokers() == ["b:1"]
    assert t.broker_addrs() == {"a:1"}
    assert t.update("T", None) and t.clean_offline_brokers() == ["a:1"]


def test_default_route_caps_queue_nums() -> None:
    r = default_route_for(_route(("a", 8, 7, {0: "a:1"})))
    assert (r.queue_datas[0].read_queue_nums, r.queue_datas[0].write_queue_nums) == (4, 4)


def test_instance_heartbeat_data_and_targets() -> None:
    core = MQClientInstance("1.2.3.4@1")
    core.on_route("T", _route(("a", 4, 6, {0: "m:1", 1: "s:1"})))
    assert core.heartbeat_targets() == []  # no group: nothing to say
    assert core.register_producer("pg") and not core.register_producer("pg")
    assert core.heartbeat_targets() == ["m:1"]  # producers only: masters
    data = ConsumerData("cg", subscription_data_set=[SubscriptionData.build("T", "*"),
                                                     SubscriptionData.build("%RETRY%cg", "*")])
    assert core.register_consumer(data) and not core.register_consumer(data)
    assert core.heartbeat_targets() == ["m:1", "s:1"]  # with consumers: every address
    hb = core.heartbeat_data()
    assert hb.client_id == "1.2.3.4@1" and [p.group_name for p in hb.producer_data_set] == ["pg"]
    assert core.topics_in_use() == {"T", "%RETRY%cg"}
    changed, new = core.on_route("T", _route(("a", 4, 6, {0: "m:1", 1: "s:1", 2: "s:2"})))
    assert changed and new == {"s:2"}


def test_java_hash_selector_literals() -> None:
    # values printed by a Java 17 program: s.hashCode(), Math.abs(s.hashCode() % 4)
    assert java_hash("hello") == 99162322 and hash_index("hello", 4) == 2
    assert java_hash("order-7") == -1207111304 and hash_index("order-7", 4) == 0
    assert java_hash("订单-1") == 1085411543 and hash_index("订单-1", 4) == 3
    assert hash_index(-7, 4) == 3 and hash_index(10, 4) == 2  # Integer.hashCode is the value
    with pytest.raises(TypeError):
        java_hash(1.5)


@pytest.mark.parametrize("name", ["", " ", "a b", "a/b", "x" * 128, "ü"])
def test_bad_topic_names(name: str) -> None:
    with pytest.raises(MessageValidationError):
        check_topic(name)


def test_validators() -> None:
    check_topic("%RETRY%cg_1|x-y")
    check_group("CID_ok-1")
    with pytest.raises(MessageValidationError, match="blank"):
        check_group("")
    with pytest.raises(MessageValidationError, match="255"):
        check_group("g" * 256)
    check_message(Message("T", b"x" * 10), max_message_size=10)
    with pytest.raises(MessageValidationError, match="MAX: 10"):
        check_message(Message("T", b"x" * 11), max_message_size=10)
    with pytest.raises(MessageValidationError, match=r"actors\.client\.Message"):
        check_message("not a message")  # type: ignore[arg-type]
    with pytest.raises(MessageValidationError, match="Retry Group"):
        check_batch([Message("%RETRY%g", b"1")])
    with pytest.raises(MessageValidationError, match="empty"):
        check_batch([])


def test_records_frozen_and_wire_properties() -> None:
    m = Message("T", bytearray(b"ab"), tags="A", keys=["k1", "k2"], properties={"p": "v"},
                delay_level=3)
    assert m.body == b"ab" and isinstance(m.body, bytes) and m.keys == "k1 k2"
    assert m.key_list == ["k1", "k2"]
    assert m.wire_properties() == {"p": "v", "TAGS": "A", "KEYS": "k1 k2", "DELAY": "3"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.topic = "U"  # type: ignore[misc]
    assert hash(m) == hash(Message("T", b"ab", tags="A", keys="k1 k2", delay_level=3))
    assert SendStatus.SEND_OK == "SEND_OK"


@given(st.lists(st.tuples(st.integers(1, 255), st.binary(max_size=300)), max_size=20),
       st.lists(st.integers(1, 50), max_size=30))
def test_channel_records_split_anywhere(records: list[tuple[int, bytes]],
                                        cuts: list[int]) -> None:  # fmt: skip
    stream = b"".join(ch.encode_record(k, p) for k, p in records)
    dec = KindDecoder(ch.MAX_RECORD)
    got: list[tuple[int, bytes]] = []
    pos = 0
    for c in cuts:
        got += [(k, bytes(p)) for k, p in dec.feed(stream[pos:pos + c])]
        pos += c
    got += [(k, bytes(p)) for k, p in dec.feed(stream[pos:])]
    assert got == records


def test_channel_queue_writes_parts_as_one_record_on_flush() -> None:
    a, b = socket.socketpair()
    end, peer = ch.ChannelEnd(a), ch.ChannelEnd(b)
    try:
        end.queue(7, b"head", memoryview(b"--body--")[2:6])
        end.queue(9, b"x")
        assert end.has_out  # nothing written before the flush
        assert end.flush()
        got: list[tuple[int, bytes]] = []
        for _ in range(100):  # bounded: both records are tiny
            got += [(k, bytes(p)) for k, p in peer.read_records() or []]
            if len(got) == 2:
                break
        assert got == [(7, b"headbody"), (9, b"x")]
    finally:
        end.close()
        peer.close()


def test_channel_rejects_garbage() -> None:
    with pytest.raises(ch.ChannelError):
        KindDecoder(ch.MAX_RECORD).feed(b"\x00\x00\x00\x00\x01")


def test_broker_requests_are_routed() -> None:
    notify = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                     {"consumerGroup": "cg"}, oneway=True)
    r = route(notify)
    assert (r.target, r.group, r.needs_answer) == (Target.CONSUMER, "cg", False)
    info = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                   {"consumerGroup": "cg", "clientId": "x"})
    assert route(info).needs_answer and route(info).target is Target.CONSUMER
    check = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {}, oneway=True)
    assert route(check).target is Target.USER and not route(check).needs_answer
    reply = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, {})
    assert route(reply).target is Target.USER and not route(reply).needs_answer
    other = RemotingCommand.request(RequestCode.SEND_MESSAGE, {})
    assert route(other).target is Target.NOBODY and route(other).needs_answer
