"""First frames captured from real clients (spec FIRST_FRAMES.md) decode to the headers shown."""

from __future__ import annotations

import json
import struct

import pytest

from protocol import headers as h
from protocol.codes import LanguageCode, RequestCode
from protocol.framing import FrameDecoder

_ALIONS_ROUTE = """
00000067000000637b22636f6465223a3130352c226c616e6775616765223a22
4a415641222c226f7061717565223a312c22666c6167223a302c227665727369
6f6e223a3132312c226578744669656c6473223a7b22746f706963223a224672
616d65546f706963227d7d
"""
_CPP_SIGNATURE_RETRY = "1iiazlDsEADJ922hXSzCR0waDeE="
_CPP_SIGNATURE_TOPIC = "2xjf0FBPIblbi6xXlEXh6Dpnbzw="

# name -> (hex dump, code, language, version, opaque, remark, extFields), from FIRST_FRAMES.md.
FIRST_FRAMES = {
    "alions-consumer": (_ALIONS_ROUTE, 105, "JAVA", 121, 1, None, {"topic": "FrameTopic"}),
    "alions-create-topic": (
        """
        000000530000004f7b22636f6465223a3130362c226c616e6775616765223a22
        4a415641222c226f7061717565223a312c22666c6167223a302c227665727369
        6f6e223a3132312c226578744669656c6473223a7b7d7d
        """,
        106, "JAVA", 121, 1, None, {},
    ),
    "alions-producer": (_ALIONS_ROUTE, 105, "JAVA", 121, 1, None, {"topic": "FrameTopic"}),
    "cpp-consumer": (
        """
        000000c7000000c37b22636f6465223a3130352c226578744669656c6473223a
        7b224163636573734b6579223a22222c224f6e734368616e6e656c223a22414c
        4959554e222c225369676e6174757265223a22316969617a6c44734541444a39
        32326858537a43523077614465453d222c22746f706963223a22255245545259
        254672616d654347227d2c22666c6167223a302c226c616e6775616765223a22
        435050222c226f7061717565223a302c2272656d61726b223a22222c22766572
        73696f6e223a3333337d0a
        """,
        105, "CPP", 333, 0, None,
        {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": _CPP_SIGNATURE_RETRY,
         "topic": "%RETRY%FrameCG"},
    ),
    "cpp-producer": (
        """
        000000c3000000bf7b22636f6465223a3130352c226578744669656c6473223a
        7b224163636573734b6579223a22222c224f6e734368616e6e656c223a22414c
        4959554e222c225369676e6174757265223a2232786a663046425049626c6269
        3678586c4558683644706e627a773d222c22746f706963223a224672616d6554
        6f706963227d2c22666c6167223a302c226c616e6775616765223a2243505022
        2c226f7061717565223a302c2272656d61726b223a22222c2276657273696f6e
        223a3333337d0a
        """,
        105, "CPP", 333, 0, None,
        {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": _CPP_SIGNATURE_TOPIC,
         "topic": "FrameTopic"},
    ),
    "cpp12-consumer": (
        """
        000000c6000000c27b22636f6465223a3130352c226578744669656c6473223a
        7b224163636573734b6579223a22222c224f6e734368616e6e656c223a22414c
        4959554e222c225369676e6174757265223a22316969617a6c44734541444a39
        32326858537a43523077614465453d222c22746f706963223a22255245545259
        254672616d654347227d2c22666c6167223a302c226c616e6775616765223a22
        435050222c226f7061717565223a302c2272656d61726b223a22222c22766572
        73696f6e223a36337d0a
        """,
        105, "CPP", 63, 0, None,
        {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": _CPP_SIGNATURE_RETRY,
         "topic": "%RETRY%FrameCG"},
    ),
    "cpp12-producer": (
        """
        000000c2000000be7b22636f6465223a3130352c226578744669656c6473223a
        7b224163636573734b6579223a22222c224f6e734368616e6e656c223a22414c
        4959554e222c225369676e6174757265223a2232786a663046425049626c6269
        3678586c4558683644706e627a773d222c22746f706963223a224672616d6554
        6f706963227d2c22666c6167223a302c226c616e6775616765223a2243505022
        2c226f7061717565223a302c2272656d61726b223a22222c2276657273696f6e
        223a36337d0a
        """,
        105, "CPP", 63, 0, None,
        {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": _CPP_SIGNATURE_TOPIC,
         "topic": "FrameTopic"},
    ),
}  # fmt: skip


def _bytes(dump: str) -> bytes:
    return bytes.fromhex("".join(dump.split()))


@pytest.mark.parametrize("name", sorted(FIRST_FRAMES))
def test_first_frame_decodes_to_documented_header(name: str) -> None:
    dump, code, lang, version, opaque, remark, ext = FIRST_FRAMES[name]
    data = _bytes(dump)
    [cmd] = FrameDecoder().feed_commands(data)
    assert cmd.code == code
    assert cmd.language == LanguageCode[lang]
    assert (cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (version, opaque, 0, remark)
    assert cmd.ext_fields == ext
    assert cmd.serialize_type == 0 and bytes(cmd.body) == b""
    if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
        assert h.GetRouteInfoRequestHeader.from_ext(cmd.ext_fields).topic == ext["topic"]


def test_all_first_frames_in_one_stream() -> None:
    data = b"".join(_bytes(v[0]) for v in FIRST_FRAMES.values())
    cmds = FrameDecoder().feed_commands(data)
    assert [c.code for c in cmds] == [v[1] for v in FIRST_FRAMES.values()]


# Request sequences from FIRST_FRAMES.md: (code, version, extFields as the client sent them,
# with JSON numbers and booleans where the client used them).
_SIG = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "x"}
OBSERVED = [
    (310, 121, {"a": "PG_a", "b": "AccBasic", "c": "TBW102", "d": 4, "e": 1, "f": 0,
                "g": 1795303321205, "h": 0, "i": "TAGS\x01Tag0\x02KEYS\x01key-0\x02", "j": 0,
                "k": False}),
    (17, 121, {"defaultTopic": "TBW102", "order": False, "perm": 6, "readQueueNums": 4,
               "topic": "AccBasic", "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
               "writeQueueNums": 4}),
    (35, 121, {"clientID": "192.0.2.2@28508", "producerGroup": "PG_a"}),
    (11, 121, {"commitOffset": 0, "consumerGroup": "CG", "maxMsgNums": 32, "queueId": 0,
               "queueOffset": 0, "subVersion": 1795303321372, "subscription": "*",
               "suspendTimeoutMillis": 15000, "sysFlag": 6, "topic": "AccBasic"}),
    (15, 121, {"commitOffset": 5, "consumerGroup": "CG", "queueId": 0, "topic": "AccBasic"}),
    (14, 333, {**_SIG, "consumerGroup": "CG", "queueId": 0, "topic": "AccBasic"}),
    (310, 333, {**_SIG, "a": "PG", "b": "AccBasic", "c": "TBW102", "d": 4, "e": 0, "f": 0,
                "g": "1795303321788", "h": 0, "i": "KEYS\x01k\x02WAIT\x01true\x02", "j": "0",
                "k": "0", "l": 16, "m": "0"}),
    (35, 333, {**_SIG, "clientID": "127.0.0.1@28626#DEFAULT", "consumerGroup": "",
               "producerGroup": "PG"}),
    (38, 333, {**_SIG, "consumerGroup": "CG"}),
    (11, 333, {**_SIG, "commitOffset": "0", "consumerGroup": "CG", "maxMsgNums": 32,
               "queueId": 0, "queueOffset": "0", "subVersion": "1795303321879",
               "subscription": "*", "suspendTimeoutMillis": "15000", "sysFlag": 6,
               "topic": "AccBasic"}),
    (37, 333, {**_SIG, "commitLogOffset": "21007", "commitOrRollback": "8",
               "fromTransactionCheck": "0", "msgId": "7F00000171DB06F908376C02EBBB0005",
               "producerGroup": "G_TX", "tranStateTableOffset": "0", "transactionId": ""}),
    (10, 63, {**_SIG, "batch": "0", "bornTimestamp": "1795303323279", "defaultTopic": "TBW102",
              "defaultTopicQueueNums": 4, "flag": 0, "producerGroup": "PG", "properties": "x",
              "queueId": 0, "reconsumeTimes": "0", "sysFlag": 0, "topic": "AccBasic",
              "unitMode": "0"}),
]  # fmt: skip


@pytest.mark.parametrize(("code", "version", "ext"), OBSERVED)
def test_observed_requests_parse_into_typed_headers(code: int, version: int, ext: dict) -> None:
    header = json.dumps(
        {"code": code, "language": "JAVA", "opaque": 1, "flag": 0, "version": version,
         "extFields": ext}
    ).encode()  # fmt: skip
    [cmd] = FrameDecoder().feed_commands(struct.pack(">ii", 4 + len(header), len(header)) + header)
    assert all(isinstance(v, str) for v in cmd.ext_fields.values())
    hdr = h.decode_request_header(cmd.code, cmd.ext_fields)
    assert hdr is not None
    if code in (10, 310):
        assert isinstance(hdr, h.SendMessageRequestHeader)
        assert hdr.default_topic == "TBW102" and hdr.default_topic_queue_nums == 4
        assert hdr.born_timestamp > 1_700_000_000_000
        assert hdr.unit_mode is False
        assert hdr.batch in (None, False)
    elif code == 11:
        assert isinstance(hdr, h.PullMessageRequestHeader)
        assert (hdr.sys_flag, hdr.suspend_timeout_millis, hdr.max_msg_nums) == (6, 15000, 32)
    elif code == 37:
        assert isinstance(hdr, h.EndTransactionRequestHeader)
        assert (hdr.commit_log_offset, hdr.commit_or_rollback) == (21007, 8)
        assert hdr.from_transaction_check is False
    elif code == 17:
        assert isinstance(hdr, h.CreateTopicRequestHeader)
        assert (hdr.perm, hdr.order, hdr.topic_sys_flag) == (6, False, 0)
    elif code == 35:
        assert isinstance(hdr, h.UnregisterClientRequestHeader)
        assert hdr.producer_group == ext["producerGroup"]
