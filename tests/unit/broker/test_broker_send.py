"""Send processor: checks in order, auto-create, DLQ redirect, response headers, batch."""

from __future__ import annotations

import json
from typing import Any

from broker_kit import Broker, send_ext

from actors.broker.processors.send import RESPONSE_KEYS
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.headers import SendMessageResponseHeader
from protocol.message import decode_messages, decode_offset_msg_id
from protocol.message_batch import BatchItem, encode_batch


def test_send_auto_creates_topic_and_answers(broker: Broker) -> None:
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("NewTopic", queue_id=1), b"hello")
    assert r is not None and r.code == RS.SUCCESS, r.remark
    ext = r.ext_fields
    assert ext["queueId"] == "1" and ext["queueOffset"] == "0"
    assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
    host, port, phy = decode_offset_msg_id(ext["msgId"])
    assert (host, port, phy) == ("127.0.0.1", 10911, 0)
    # topic created with min(4, 8) queues, replicated to the pull actor, persisted, to register
    tc = broker.ctxs["pull"].topics.get("NewTopic")
    assert tc is not None and tc.write_queue_nums == 4 and tc.perm == 6
    assert broker.controller.take_register_needed()
    assert "NewTopic" in broker.controller.topics_json()
    msgs = decode_messages(broker.store.select_one_message_by_offset(0))
    assert msgs[0].body == b"hello"
    assert msgs[0].properties.get("CLUSTER") == "DefaultCluster"
    assert "WAIT" not in msgs[0].properties
    assert msgs[0].born_address.startswith("127.0.0.1:40000")


def test_send_v1_long_names_cpp12(broker: Broker) -> None:
    ext = {
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "q=",
        "batch": "0",
        "bornTimestamp": "1795303323279",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "flag": 0,
        "producerGroup": "PG",
        "properties": "TAGS\x01Tag0\x02WAIT\x01true\x02",
        "queueId": 0,
        "reconsumeTimes": "0",
        "sysFlag": 0,
        "topic": "CppTopic",
        "unitMode": "0",
    }
    r = broker.call(RC.SEND_MESSAGE, ext, b"x", language="CPP", version=63)
    assert r.code == RS.SUCCESS, r.remark
    assert r.ext_fields["queueId"] == "0"


def test_negative_queue_id_picks_random(broker: Broker) -> None:
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("Rnd", queue_id=-1), b"x")
    assert r.code == RS.SUCCESS
    assert 0 <= int(r.ext_fields["queueId"]) < 4


def test_bad_queue_id_and_topics(broker: Broker) -> None:
    broker.call(RC.SEND_MESSAGE_V2, send_ext("Q"), b"x")
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("Q", queue_id=4), b"x")
    assert r.code == RS.SYSTEM_ERROR and "queueId[4] is illegal" in r.remark
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("bad topic!"), b"x")
    assert r.code == RS.SYSTEM_ERROR and "illegal characters" in r.remark
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("SCHEDULE_TOPIC_XXXX"), b"x")
    assert r.code == RS.NO_PERMISSION
    assert r.remark == "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."
    assert r.ext_fields["MSG_REGION"] == "DefaultRegion" and "msgId" not in r.ext_fields


def test_missing_header_field(broker: Broker) -> None:
    ext = send_ext("T")
    del ext["b"]
    r = broker.call(RC.SEND_MESSAGE_V2, ext, b"x")
    assert r.code == RS.SYSTEM_ERROR and "<b>" in r.remark
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("T", e="zero"), b"x")
    assert r.code == RS.SYSTEM_ERROR and "<e>" in r.remark


def test_no_auto_create_gives_17(tmp_path) -> None:
    b = Broker(str(tmp_path / "s"), autoCreateTopicEnable=False)
    try:
        r = b.call(RC.SEND_MESSAGE_V2, send_ext("Nope"), b"x")
        assert r.code == RS.TOPIC_NOT_EXIST
        assert r.remark.startswith("topic[Nope] not exist, apply first please!")
        # %RETRY% topics are still created with one queue
        r = b.call(RC.SEND_MESSAGE_V2, send_ext("%RETRY%G1"), b"x")
        assert r.code == RS.SUCCESS, r.remark
        assert b.ctxs["send"].topics.get("%RETRY%G1").write_queue_nums == 1
    finally:
        b.close()


def test_multi_tag_sysflag(broker: Broker) -> None:
    r = broker.call(
        RC.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": "MT",
            "defaultTopic": "TBW102",
            "readQueueNums": 2,
            "writeQueueNums": 2,
            "perm": 6,
            "topicFilterType": "MULTI_TAG",
            "topicSysFlag": 0,
            "order": False,
        },
    )
    assert r.code == RS.SUCCESS
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("MT"), b"x")
    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    assert decode_messages(broker.store.select_one_message_by_offset(phy))[0].sys_flag & 2


def test_retry_topic_past_max_goes_to_dlq(broker: Broker) -> None:
    ext = send_ext("%RETRY%CG", props="RETRY_TOPIC\x01T\x02DELAY\x013", j=3, l=3)
    r = broker.call(RC.SEND_MESSAGE_V2, ext, b"dead")
    assert r.code == RS.SUCCESS, r.remark
    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    m = decode_messages(broker.store.select_one_message_by_offset(phy))[0]
    # 4.9.x handleRetryAndDLQ's setDelayTimeLevel(0) is lost when the request's properties are
    # set: the client's DELAY parks the dead letter in SCHEDULE_TOPIC_XXXX first
    assert m.topic == "SCHEDULE_TOPIC_XXXX" and m.queue_id == 2 and m.properties["DELAY"] == "3"
    assert m.properties["REAL_TOPIC"] == "%DLQ%CG" and m.properties["REAL_QID"] == "0"
    assert broker.ctxs["admin"].topics.get("%DLQ%CG") is not None
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("%RETRY%CG", props="A\x01b", j=3, l=3), b"d2")
    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    assert decode_messages(broker.store.select_one_message_by_offset(phy))[0].topic == "%DLQ%CG"
    # below the maximum it stays a retry send (header maxReconsumeTimes honoured, version >= 121)
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("%RETRY%CG", j=1, l=3), b"again")
    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    assert decode_messages(broker.store.select_one_message_by_offset(phy))[0].topic == "%RETRY%CG"


def test_dlq_turn_answers_the_queue_asked_for(broker: Broker) -> None:
    """SendMessageProcessor answers queueIdInt, the request's queue, also when
    handleRetryAndDLQ sent the message to the DLQ's queue 0."""
    ext = {"topic": "%RETRY%G2", "defaultTopic": "TBW102", "readQueueNums": 4,
           "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
           "order": False}  # fmt: skip
    assert broker.call(RC.UPDATE_AND_CREATE_TOPIC, ext).code == RS.SUCCESS
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("%RETRY%G2", queue_id=3, j=3, l=3), b"dead")
    assert r.code == RS.SUCCESS and r.ext_fields["queueId"] == "3"
    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    m = decode_messages(broker.store.select_one_message_by_offset(phy))[0]
    assert (m.topic, m.queue_id) == ("%DLQ%G2", 0)


def test_batch_checks_the_topic_as_msg_check_first(broker: Broker) -> None:
    """sendBatchMessage runs msgCheck before its own checks: a name over 127 characters gets
    TopicValidator's answer (1, which a Java client retries), not MESSAGE_ILLEGAL."""
    items = [BatchItem(0, b"m", {"UNIQ_KEY": "K"})]
    r = broker.call(RC.SEND_BATCH_MESSAGE, send_ext("t" * 200, m=True), encode_batch(items))
    assert r.code == RS.SYSTEM_ERROR and "longer than topic max length" in (r.remark or "")


def test_oneway_send_is_stored_not_answered(broker: Broker) -> None:
    assert broker.call(RC.SEND_MESSAGE_V2, send_ext("OW"), b"x", oneway=True) is None
    assert broker.store.get_max_offset_in_queue("OW", 0) == 1


def test_batch_send(broker: Broker) -> None:
    items = [BatchItem(0, f"m{i}".encode(), {"UNIQ_KEY": f"K{i}"}) for i in range(10)]
    ext = send_ext("BT", props="WAIT\x01true", m=True)
    r = broker.call(RC.SEND_BATCH_MESSAGE, ext, encode_batch(items))
    assert r.code == RS.SUCCESS, r.remark
    ids = r.ext_fields["msgId"].split(",")
    assert len(ids) == 10 and r.ext_fields["queueOffset"] == "0"
    assert broker.store.get_max_offset_in_queue("BT", 0) == 10
    r = broker.call(RC.SEND_BATCH_MESSAGE, send_ext("%RETRY%X", m=True), encode_batch(items))
    assert r.code == RS.MESSAGE_ILLEGAL


def test_sync_flush_group_commit(tmp_path) -> None:
    b = Broker(str(tmp_path / "s"), sync_flush=True)
    try:
        assert b.call(RC.SEND_MESSAGE_V2, send_ext("SF"), b"a", conn_id=5) is None
        assert b.call(RC.SEND_MESSAGE_V2, send_ext("SF"), b"b", conn_id=6) is None
        core = b.cores["send"]
        assert core.flush_and_release(0) == 2
        sent = b.outbox.take()
        assert [c for c, _ in sent] == [5, 6]
        assert all(cmd.code == RS.SUCCESS and cmd.is_response for _, cmd in sent)
        # WAIT=false is answered at once
        r = b.call(RC.SEND_MESSAGE_V2, send_ext("SF", props="WAIT\x01false"), b"c")
        assert r is not None and r.code == RS.SUCCESS
    finally:
        b.close()


def test_transaction_half_message(broker: Broker) -> None:
    ext = send_ext("TX", props="TRAN_MSG\x01true\x02PGROUP\x01PG", f=4)
    r = broker.call(RC.SEND_MESSAGE_V2, ext, b"half")
    assert r.code == RS.SUCCESS
    assert broker.store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 1
    assert broker.store.get_max_offset_in_queue("TX", 0) == 0


def test_reject_transaction(tmp_path) -> None:
    b = Broker(str(tmp_path / "s"), rejectTransactionMessage=True)
    try:
        r = b.call(RC.SEND_MESSAGE_V2, send_ext("TX", props="TRAN_MSG\x01true"), b"x")
        assert r.code == RS.NO_PERMISSION
    finally:
        b.close()


def test_send_back_to_retry_and_dlq(broker: Broker) -> None:
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("Orig"), b"payload")
    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    back = {
        "offset": phy,
        "group": "CG",
        "delayLevel": 0,
        "originMsgId": "ABC",
        "originTopic": "Orig",
        "maxReconsumeTimes": 16,
    }
    r = broker.call(RC.CONSUMER_SEND_MSG_BACK, back)
    assert r.code == RS.SUCCESS, r.remark
    # delayed via SCHEDULE_TOPIC_XXXX, level 3 => queue 2
    assert broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1
    assert broker.ctxs["pull"].topics.get("%RETRY%CG") is not None
    r = broker.call(RC.CONSUMER_SEND_MSG_BACK, dict(back, delayLevel=-1))
    assert r.code == RS.SUCCESS
    assert broker.store.get_max_offset_in_queue("%DLQ%CG", 0) == 1
    r = broker.call(RC.CONSUMER_SEND_MSG_BACK, dict(back, offset=999999))
    assert r.code == RS.SYSTEM_ERROR and r.remark == "look message by offset failed, 999999"
    # a unit-mode consumer's retry topic: TopicSysFlag.buildSysFlag(false, true)
    r = broker.call(RC.CONSUMER_SEND_MSG_BACK, dict(back, group="UG", unitMode="true"))
    assert r.code == RS.SUCCESS
    assert broker.ctxs["send"].topics.get("%RETRY%UG").topic_sys_flag == 2
    assert broker.ctxs["send"].topics.get("%RETRY%CG").topic_sys_flag == 0


def _record_at(broker: Broker, topic: str, queue_id: int, qoff: int = 0) -> Any:
    unit = broker.store.consume_queues[(topic, queue_id)].get_unit(qoff)
    assert unit is not None
    return decode_messages(broker.store.select_one_message_by_offset(unit[0]))[0]


def test_a_compressed_body_is_stored_again_compressed(broker: Broker) -> None:
    """lookMessageByOffset keeps the body as stored: a Java producer's zlib body (sysFlag
    COMPRESSED) goes to the schedule queue, the DLQ and, once due, the retry topic as the same
    bytes with the flag, not inflated (a body inflated past maxMessageSize stalled its level)."""
    import zlib

    raw = b"z" * 100_000
    packed = zlib.compress(raw)
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("Orig", f=1), packed)  # f: sysFlag
    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    back = {"offset": phy, "group": "CG", "delayLevel": 0, "originMsgId": "ABC",
            "originTopic": "Orig", "maxReconsumeTimes": 16}  # fmt: skip
    assert broker.call(RC.CONSUMER_SEND_MSG_BACK, back).code == RS.SUCCESS
    assert broker.call(RC.CONSUMER_SEND_MSG_BACK, dict(back, delayLevel=-1)).code == RS.SUCCESS
    for topic, qid in (("SCHEDULE_TOPIC_XXXX", 2), ("%DLQ%CG", 0)):
        unit = broker.store.consume_queues[(topic, qid)].get_unit(0)
        assert unit is not None and unit[1] < 1000  # stored small
        [m] = decode_messages(broker.store.select_one_message_by_offset(unit[0]),
                              decompress=False)  # fmt: skip
        assert m.sys_flag & 1 and bytes(m.body) == packed
        [m] = decode_messages(broker.store.select_one_message_by_offset(unit[0]))
        assert bytes(m.body) == raw  # what a consumer reads


def test_send_back_records_carry_what_java_stores(broker: Broker) -> None:
    """asyncConsumerSendMsgBack writes the properties string after setWaitStoreMsgOK(false) and
    setDelayTimeLevel: the retry record has WAIT=false and its DELAY, the DLQ record DELAY=0."""
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("Orig", props="UNIQ_KEY\x01U7", h=3), b"p")
    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    back = {"offset": phy, "group": "CG", "delayLevel": 0, "maxReconsumeTimes": 16}
    assert broker.call(RC.CONSUMER_SEND_MSG_BACK, back).code == RS.SUCCESS
    parked = _record_at(broker, "SCHEDULE_TOPIC_XXXX", 2)
    p = parked.properties
    assert p["WAIT"] == "false" and p["DELAY"] == "3" and p["RETRY_TOPIC"] == "Orig"
    assert p["REAL_TOPIC"] == "%RETRY%CG" and p["REAL_QID"] == "0" and p["UNIQ_KEY"] == "U7"
    assert p["ORIGIN_MESSAGE_ID"] == r.ext_fields["msgId"]
    assert parked.reconsume_times == 1 and parked.flag == 3
    assert broker.call(RC.CONSUMER_SEND_MSG_BACK, dict(back, delayLevel=-1)).code == RS.SUCCESS
    dlq = _record_at(broker, "%DLQ%CG", 0)
    assert dlq.properties["DELAY"] == "0" and dlq.properties["WAIT"] == "false"
    assert dlq.properties["RETRY_TOPIC"] == "Orig" and "REAL_TOPIC" not in dlq.properties


def test_all_topic_config_after_send(broker: Broker) -> None:
    broker.call(RC.SEND_MESSAGE_V2, send_ext("ZZ"), b"x")
    r = broker.call(RC.GET_ALL_TOPIC_CONFIG, {})
    table = json.loads(r.body)["topicConfigTable"]
    assert "ZZ" in table and table["TBW102"]["perm"] == 7


def test_send_response_keys_are_the_typed_header(broker: Broker) -> None:
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("Keys"), b"x")
    assert set(r.ext_fields) == set(RESPONSE_KEYS) - {"transactionId"}
    hdr = SendMessageResponseHeader.from_ext(r.ext_fields)
    assert hdr.to_ext() == r.ext_fields and hdr.queue_offset == 0
    # the batch / error path builds the same keys through the shared helper
    items = [BatchItem(0, b"b", {"UNIQ_KEY": "K"})]
    r = broker.call(RC.SEND_BATCH_MESSAGE, send_ext("Keys", m=True), encode_batch(items))
    assert set(r.ext_fields) == set(RESPONSE_KEYS) - {"transactionId"}


def test_cached_topic_checks_stay_correct(broker: Broker) -> None:
    for _ in range(2):  # second round is served from the per-core caches
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext("bad topic!"), b"x")
        assert r.code == RS.SYSTEM_ERROR and "illegal characters" in r.remark
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext("OFFSET_MOVED_EVENT"), b"x")
        assert r.code == RS.NO_PERMISSION
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext("Fine"), b"x", peer=("10.0.0.9", 5))
        assert r.code == RS.SUCCESS
        phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
        m = decode_messages(broker.store.select_one_message_by_offset(phy))[0]
        assert m.born_address.startswith("10.0.0.9:5")


def test_bad_optional_number_names_the_field(broker: Broker) -> None:
    # Java's Integer.parseInt: an empty or malformed optional number is an error too
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("T", j="x"), b"x")
    assert r.code == RS.SYSTEM_ERROR and "<j>" in r.remark
    assert r.ext_fields["MSG_REGION"] == "DefaultRegion" and r.ext_fields["TRACE_ON"] == "true"
