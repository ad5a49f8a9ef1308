"""The reference RocketMQ 4.9.8 launcher (deploy.reference) starts, serves and stops by PID."""

from __future__ import annotations

from typing import Any

import pytest

from deploy import procinfo
from deploy.wire import BlockingClient
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand

pytestmark = pytest.mark.integration


def test_reference_cluster_serves_and_stops(reference_cluster: Any) -> None:
    with BlockingClient(reference_cluster.broker_addr()) as c:
        resp = c.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 5.0)
    assert resp.code == ResponseCode.SUCCESS
    assert b"brokerName=broker-a" in bytes(resp.body)
    pid = reference_cluster.pid()
    assert pid is not None
    reference_cluster.stop()
    assert procinfo.is_zombie(pid)


# header numbers the reference reads with Integer.parseInt / Long.parseLong: each is sent to
# both brokers and must get the same answer (a NumberFormatException is SYSTEM_ERROR there)
NUMBER_TEXTS = ["1", " 1", "1 ", "1_0", "+1", "\uff11", "\U0001d7cf", "\n1", "-0", "", "0x1"]


def _number_answers(addr: tuple[str, int] | str) -> list[tuple[str, int, str | None]]:
    """(what was sent, the answer's code, the queue it names or the offset it moved to)."""
    from deploy.bench.requests import create_topic_cmd, pull_cmd
    from protocol.message_batch import BatchItem, encode_batch

    out: list[tuple[str, int, str | None]] = []
    with BlockingClient(addr) as c:
        r = c.invoke(create_topic_cmd("TNum", 4), 10.0)
        assert r.code == ResponseCode.SUCCESS, r.remark
        for text in NUMBER_TEXTS:
            ext = {"a": "g", "b": "TNum", "c": "TBW102", "d": "4", "e": text, "f": "0",
                   "g": "1700000000000", "h": "0", "i": "TAGS\x01a\x02", "j": "0",
                   "k": "false", "m": "false"}  # fmt: skip
            r = c.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"x"), 10.0)
            out.append((f"send queueId {text!r}", r.code, (r.ext_fields or {}).get("queueId")))
        for key, text in [("queueOffset", t) for t in NUMBER_TEXTS] + [
                ("maxMsgNums", "-1"), ("maxMsgNums", "0"), ("queueId", "-1")]:  # fmt: skip
            cmd = pull_cmd("gNum", "TNum", 1, 0)
            assert cmd.ext_fields is not None
            cmd.ext_fields[key] = text
            r = c.invoke(cmd, 10.0)
            out.append((f"pull {key} {text!r}", r.code,
                        (r.ext_fields or {}).get("nextBeginOffset")))  # fmt: skip
        for text in ["yes", "false", "0"]:  # Boolean.parseBoolean ("1" is ours: C++'s true)
            ext = {"a": "g", "b": "TNum", "c": "TBW102", "d": "4", "e": "2", "f": "0",
                   "g": "1700000000000", "h": "0", "j": "0", "k": "false", "m": text}
            r = c.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"x"), 10.0)
            out.append((f"send batch flag {text!r}", r.code, (r.ext_fields or {}).get("queueId")))
        for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            # SendMessageRequestHeaderV2.decode leaves a missing field null: an existing topic
            # is served without a, c or d; a topic to create needs c and d
            body = b"x" if code == RequestCode.SEND_MESSAGE_V2 else encode_batch(
                [BatchItem(0, b"x", {"TAGS": "a"})])  # fmt: skip
            for key in "abcdefgh":
                for topic in ("TNum", f"TNumNew{int(code)}{key}"):
                    ext = {"a": "g", "b": topic, "c": "TBW102", "d": "4", "e": "1", "f": "0",
                           "g": "1700000000000", "h": "0", "i": "TAGS\x01a\x02", "j": "0",
                           "k": "false", "m": "false" if body == b"x" else "true"}  # fmt: skip
                    del ext[key]
                    r = c.invoke(RemotingCommand.request(code, ext, body), 10.0)
                    out.append((f"{int(code)} to {topic} without {key}", r.code,
                                (r.ext_fields or {}).get("queueId")))  # fmt: skip
        one = encode_batch([BatchItem(0, b"x", {"TAGS": "a"})])
        for name, body in [("empty", b""), ("garbage", b"garbage"), ("cut", one[:-3]),
                           ("a byte over", one + b"\x00"), ("total ignored", b"\0\0\0\5" + one[4:]),
                           ("body past the end", one[:16] + b"\0\0\x27\x0f" + one[20:])]:
            ext = {"a": "g", "b": "TNum", "c": "TBW102", "d": "4", "e": "1", "f": "0",
                   "g": "1700000000000", "h": "0", "j": "0", "k": "false", "m": "true"}
            r = c.invoke(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, body), 10.0)
            out.append((f"batch body {name}", r.code, (r.ext_fields or {}).get("queueId")))
        for name, cmd in [  # a header's checkFields, a body that is not there or not UTF-8
                ("end transaction type 99", RemotingCommand.request(RequestCode.END_TRANSACTION, {
                    "producerGroup": "g", "tranStateTableOffset": "0", "commitLogOffset": "0",
                    "commitOrRollback": "99", "msgId": "x", "fromTransactionCheck": "false"})),
                ("heartbeat without a body", RemotingCommand.request(RequestCode.HEART_BEAT)),
                ("heartbeat of nobody", RemotingCommand.request(RequestCode.HEART_BEAT, None,
                                                                b"{}")),
                ("broker config not UTF-8", RemotingCommand.request(
                    RequestCode.UPDATE_BROKER_CONFIG, None, b"\xff\xfe=1\n"))]:  # fmt: skip
            out.append((name, c.invoke(cmd, 10.0).code, None))
        for delay in ["abc", " 2", "0", "-1"]:  # getDelayTimeLevel: Integer.parseInt
            ext = {"a": "g", "b": "TNum", "c": "TBW102", "d": "4", "e": "3", "f": "0",
                   "g": "1700000000000", "h": "0", "i": f"DELAY\x01{delay}\x02", "j": "0",
                   "k": "false", "m": "false"}  # fmt: skip
            r = c.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"x"), 10.0)
            out.append((f"send DELAY {delay!r}", r.code, (r.ext_fields or {}).get("queueId")))
        for kind in ["SINGLE_TAG", "MULTI_TAG", "XX", "single_tag"]:  # TopicFilterType.valueOf
            ext = {"topic": f"TNum{kind}", "defaultTopic": "TBW102", "readQueueNums": "4",
                   "writeQueueNums": "4", "perm": "6", "topicFilterType": kind,
                   "topicSysFlag": "0", "order": "false"}
            r = c.invoke(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 10.0)
            out.append((f"create topic filter type {kind}", r.code, None))
        for num in ["-1", "0", "5"]:  # new ArrayList(maxNum): a negative one throws
            ext = {"topic": "TNum", "key": "k", "maxNum": num, "beginTimestamp": "0",
                   "endTimestamp": "9999999999999"}
            r = c.invoke(RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext), 10.0)
            out.append((f"query maxNum {num}", r.code, None))
    return out


def test_odd_header_values_are_read_as_the_reference_reads_them(
    reference_cluster: Any, local_cluster: Any
) -> None:
    from tests.integration.e2e_helpers import broker_addr, start_real

    ours = _number_answers(broker_addr(start_real(local_cluster)))
    theirs = _number_answers(reference_cluster.broker_addr())
    assert ours == theirs
    assert {code for _, code, _ in ours} == {ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR,
                                             ResponseCode.QUERY_NOT_FOUND}  # fmt: skip


# JSON header members of odd types, as a client might write them: fastjson casts them (text to
# int by Integer.parseInt after dropping commas and a trailing ".0", a fraction truncated,
# anything to a String remark, bytes that are not UTF-8 as U+FFFD); what it cannot cast ends
# the connection on both brokers
ODD_HEADERS = [
    ('"code":"30"', True), ('"code":"+30"', True), ('"code":"30.0"', True),
    ('"code":30.5', True), ('"code":3e1', True), ('"opaque":"7,000"', True),
    ('"flag":"0"', True), ('"version":"395"', True), ('"version":395.0', True),
    ('"remark":5', True), ('"remark":{"a":[1]}', True), ('"remark":true', True),
    ('"remark":"\xff"', True), ('"code":" 30"', False), ('"code":"abc"', False),
    ('"code":"3.5"', False), ('"version":{}', False), ('"language":true', False),
]


def _odd_header_outcome(addr: str, member: str) -> str:
    """`closed`, or the answer's code and opaque, for GET_MAX_OFFSET of TNum queue 0 with one
    header member written as `member` (bounded: 5 s)."""
    import socket
    import struct

    from protocol.framing import FrameDecoder

    members = {"code": "30", "flag": "0", "language": '"JAVA"', "opaque": "7",
               "version": "395"}  # fmt: skip
    key = member.split(":", 1)[0].strip('"')
    members[key] = member.split(":", 1)[1]
    text = ",".join(f'"{k}":{v}' for k, v in members.items())
    header = ("{" + text + ',"extFields":{"topic":"TNum","queueId":"0"}}').encode()
    header = header.replace("\xff".encode(), b"\xff")  # a byte that is not UTF-8
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">ii", 4 + len(header), len(header)) + header)
        decoder = FrameDecoder()
        for _ in range(100):  # bounded by count and by the 5 s timeout of each read
            data = s.recv(65536)
            if not data:
                return "closed"
            frames = decoder.feed(data)
            if frames:
                r = RemotingCommand.decode(frames[0])
                return f"code {r.code} opaque {r.opaque}"
    return "no answer"


def test_odd_json_header_members_are_read_as_the_reference_reads_them(
    reference_cluster: Any, local_cluster: Any
) -> None:
    from deploy.bench.requests import create_topic_cmd
    from tests.integration.e2e_helpers import broker_addr, start_real

    host, port = broker_addr(start_real(local_cluster))
    brokers = [f"{host}:{port}", reference_cluster.broker_addr()]
    for addr in brokers:
        with BlockingClient(addr) as c:
            assert c.invoke(create_topic_cmd("TNum", 4), 10.0).code == ResponseCode.SUCCESS
    ours = [(m, _odd_header_outcome(brokers[0], m)) for m, _ in ODD_HEADERS]
    theirs = [(m, _odd_header_outcome(brokers[1], m)) for m, _ in ODD_HEADERS]
    assert ours == theirs
    for (member, served), (_, outcome) in zip(ODD_HEADERS, ours, strict=True):
        assert outcome.startswith("code 0") == served, (member, outcome)
