"""RemotingCommand: spec example bytes, client quirks, and Hypothesis round trips per codec."""

from __future__ import annotations

import json
import struct

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from protocol.command import RemotingCommand, next_opaque
from protocol.errors import BadHeaderError, BadHeaderLengthError, UnknownSerializeTypeError

SPEC_JSON_HEADER = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,'
    b'"serializeTypeCurrentRPC":"JSON","version":409}'
)
SPEC_BINARY_FRAME = bytes.fromhex(
    "0000002d 01000029 0069 00 0199 00000001 00000000 00000000 00000014 0005 746f706963"
    " 00000009 546f70696354657374"
)


def _json_frame(header: dict | bytes, body: bytes = b"") -> bytes:
    """Frame (length stripped) around a JSON header given as a dict or raw bytes."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack(">i", len(raw)) + raw + body


def _route_request(st_: int) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=1, serialize_type=st_
    )


# --- spec examples -------------------------------------------------------------------------


def test_json_request_matches_spec_example_bytes() -> None:
    frame = _route_request(SerializeType.JSON).encode()
    assert frame == bytes.fromhex("00000087 00000083") + SPEC_JSON_HEADER
    assert len(SPEC_JSON_HEADER) == 131


def test_binary_request_matches_spec_example_bytes() -> None:
    assert _route_request(SerializeType.ROCKETMQ).encode() == SPEC_BINARY_FRAME


def test_spec_examples_decode() -> None:
    for frame in (bytes.fromhex("00000087 00000083") + SPEC_JSON_HEADER, SPEC_BINARY_FRAME):
        cmd = RemotingCommand.decode(frame[4:])
        assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, 0, 409, 1, 0)
        assert cmd.ext_fields == {"topic": "TopicTest"}
        assert cmd.remark is None
        assert not cmd.is_response and not cmd.is_oneway


def test_encode_header_plus_body_equals_encode() -> None:
    cmd = RemotingCommand.request(310, {"a": "pg"}, b"x" * 100, opaque=7)
    assert cmd.encode_header() + cmd.body == cmd.encode()
    assert struct.unpack_from(">i", cmd.encode())[0] == len(cmd.encode()) - 4


# --- JSON writing rules --------------------------------------------------------------------


def test_json_response_always_has_ext_fields_and_remark_when_set() -> None:
    req = _route_request(SerializeType.JSON)
    resp = req.make_response(ResponseCode.TOPIC_NOT_EXIST, "No topic route info")
    header = resp.encode()[8:]
    assert header == (
        b'{"code":17,"extFields":{},"flag":1,"language":"JAVA","opaque":1,'
        b'"remark":"No topic route info","serializeTypeCurrentRPC":"JSON","version":409}'
    )


def test_json_ext_keys_sorted_and_strings() -> None:
    ext = {"queueOffset": "5", "msgId": "AB", "queueId": "1"}
    resp = RemotingCommand(0, flag=1, ext_fields=ext)
    obj = json.loads(resp.encode()[8:])
    assert list(obj["extFields"]) == ["msgId", "queueId", "queueOffset"]
    assert all(isinstance(v, str) for v in obj["extFields"].values())


def test_json_non_ascii_and_control_chars_round_trip() -> None:
    cmd = RemotingCommand.request(310, {"i": "TAGS\x01Tä\x02KEYS\x01\u4e2d"}, opaque=3)
    assert RemotingCommand.decode(cmd.encode()[4:]).ext_fields == cmd.ext_fields


def test_make_response_copies_opaque_and_serialize_type() -> None:
    req = RemotingCommand.request(11, {"x": "1"}, oneway=True, serialize_type=1, opaque=-5)
    assert req.is_oneway
    resp = req.make_response(ResponseCode.PULL_NOT_FOUND, ext_fields={"a": "b"}, body=b"zz")
    assert (resp.opaque, resp.serialize_type, resp.flag) == (-5, 1, 1)
    assert resp.is_response and not resp.is_oneway
    assert (resp.version, resp.language, resp.code) == (CURRENT_VERSION, LanguageCode.JAVA, 19)
    back = RemotingCommand.decode(resp.encode()[4:])
    assert back.serialize_type == 1 and bytes(back.body) == b"zz"


def test_request_opaque_counter_increments() -> None:
    a = RemotingCommand.request(34)
    b = RemotingCommand.request(34)
    assert b.opaque == a.opaque + 1
    assert 0 <= next_opaque() <= 0x7FFFFFFF


# --- JSON parsing leniency (ali-ons, C++) --------------------------------------------------


def test_json_accepts_numbers_booleans_and_null_in_ext_fields() -> None:
    frame = _json_frame(
        {
            "code": 310,
            "language": "JAVA",
            "opaque": 1,
            "flag": 0,
            "version": 121,
            "extFields": {"d": 4, "g": 1795303321205, "k": False, "m": True, "x": None,
                          "f": 2.0, "z": 1.5, "a": "pg"},
        }
    )  # fmt: skip
    cmd = RemotingCommand.decode(frame)
    assert cmd.ext_fields == {
        "d": "4", "g": "1795303321205", "k": "false", "m": "true", "f": "2", "z": "1.5",
        "a": "pg",
    }  # fmt: skip


def test_json_language_ordinal_missing_fields_and_empty_remark() -> None:
    cmd = RemotingCommand.decode(_json_frame({"code": 34, "language": 9, "remark": ""}))
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (34, 9, 0, 0, 0)
    assert cmd.remark is None and cmd.ext_fields is None
    cmd = RemotingCommand.decode(_json_frame({"code": 34}))
    assert cmd.language == LanguageCode.JAVA


def test_json_unknown_language_name_reads_as_other() -> None:
    assert RemotingCommand.decode(_json_frame({"code": 1, "language": "NODE"})).language == 7


def test_json_trailing_newline_from_cpp_is_accepted() -> None:
    raw = (
        b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"CPP","opaque":0,'
        b'"remark":"","version":333}\n'
    )
    cmd = RemotingCommand.decode(_json_frame(raw))
    assert (cmd.language, cmd.version, cmd.remark) == (LanguageCode.CPP, 333, None)


def test_json_whitespace_around_the_header_is_accepted() -> None:
    cmd = RemotingCommand.decode(_json_frame(b' \r\n{"code":7,"language":0,"opaque":9} '))
    assert (cmd.code, cmd.language, cmd.opaque) == (7, 0, 9)


def test_unknown_request_code_decodes_and_keeps_int() -> None:
    cmd = RemotingCommand.decode(_json_frame({"code": 9999, "opaque": 4}))
    assert cmd.code == 9999
    assert RequestCode.name_of(cmd.code) == "9999"


@pytest.mark.parametrize(
    "header",
    [
        b"[1,2]",
        b'{"code":"1.5"}',
        b'{"code":" 105"}',
        b'{"code":"abc"}',
        b'{"code":[105]}',
        b'{"code":1e20}',
        b'{"opaque":4294967296}',
        b'{"opaque":"4294967296"}',
        b'{"code":1,"extFields":[1]}',
        b'{"code":1,"language":[]}',
        b'{"code":1,"extFields":{"a":NaN}}',
        b"{\xff}",
        b"",
        b"{",
        b'{"code":1}x',
        b'{"code":1}{"code":2}',
        b'{"flag":-2147483649}',
        b'{"version":{}}',
        b'{"code":1,"language":7.5}',
        b'{"code":1,"language":true}',
    ],
)
def test_json_bad_headers_raise_bad_header(header: bytes) -> None:
    with pytest.raises(BadHeaderError):
        RemotingCommand.decode(_json_frame(header))


@pytest.mark.parametrize(
    ("header", "code", "opaque", "flag", "version", "remark"),
    [  # what the reference 4.9.8 (fastjson) serves: tests/integration/test_reference.py
        (b'{"code":"105","opaque":"7"}', 105, 7, 0, 0, None),
        (b'{"code":"+105","opaque":"7,000"}', 105, 7000, 0, 0, None),
        (b'{"code":"105.0","opaque":7.9,"flag":"0","version":"395"}', 105, 7, 0, 395, None),
        (b'{"code":105.5,"version":395.0}', 105, 0, 0, 395, None),
        (b'{"code":1.05e2,"flag":true}', 105, 0, 1, 0, None),
        (b'{"code":"","opaque":"null","version":null}', 0, 0, 0, 0, None),
        (b'{"code":1,"remark":5}', 1, 0, 0, 0, "5"),
        (b'{"code":1,"remark":5.5}', 1, 0, 0, 0, "5.5"),
        (b'{"code":1,"remark":true}', 1, 0, 0, 0, "true"),
        (b'{"code":1,"remark":{"a":[1]}}', 1, 0, 0, 0, '{"a":[1]}'),
        (b'{"code":1,"remark":"\xff"}', 1, 0, 0, 0, "\ufffd"),  # new String(bytes, UTF-8)
    ],
)
def test_json_header_numbers_and_remark_are_read_as_fastjson_reads_them(
    header: bytes, code: int, opaque: int, flag: int, version: int, remark: str | None
) -> None:
    cmd = RemotingCommand.decode(_json_frame(header))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.remark) == (
        code, opaque, flag, version, remark)  # fmt: skip


def test_header_length_is_masked_to_24_bits_and_type_checked() -> None:
    with pytest.raises(UnknownSerializeTypeError):
        RemotingCommand.decode(struct.pack(">i", (7 << 24) | 0))
    with pytest.raises(BadHeaderLengthError):
        RemotingCommand.decode(struct.pack(">i", 50) + b"{}")
    with pytest.raises(BadHeaderLengthError):
        RemotingCommand.decode(b"\x00\x00")


# --- binary null/empty rules -----------------------------------------------------------------


def test_binary_empty_strings_read_as_null() -> None:
    cmd = RemotingCommand(12, flag=0, remark="", ext_fields={"a": "", "b": "x", "": "y"},
                          serialize_type=1)  # fmt: skip
    back = RemotingCommand.decode(cmd.encode()[4:])
    assert back.remark is None
    assert back.ext_fields == {"b": "x"}


def test_binary_no_ext_fields_is_none_and_fixed_size_21() -> None:
    cmd = RemotingCommand(34, opaque=9, serialize_type=1)
    frame = cmd.encode()
    assert struct.unpack_from(">i", frame, 4)[0] == (1 << 24) | 21
    assert RemotingCommand.decode(frame[4:]).ext_fields is None


def test_binary_duplicate_key_last_wins() -> None:
    ext = struct.pack(">h", 1) + b"k" + struct.pack(">i", 1) + b"1"
    ext += struct.pack(">h", 1) + b"k" + struct.pack(">i", 1) + b"2"
    header = struct.pack(">hBhiii", 1, 0, 1, 1, 0, 0) + struct.pack(">i", len(ext)) + ext
    cmd = RemotingCommand.decode(struct.pack(">i", (1 << 24) | len(header)) + header)
    assert cmd.ext_fields == {"k": "2"}


@pytest.mark.parametrize(
    "header",
    [
        struct.pack(">hBhiii", 1, 0, 1, 1, 0, 0),  # no ext_len
        struct.pack(">hBhiii", 1, 0, 1, 1, 0, 100) + b"\0\0\0\0",  # remark beyond header
        struct.pack(">hBhiii", 1, 0, 1, 1, 0, -1) + b"\0\0\0\0",  # negative remark
        struct.pack(">hBhiiii", 1, 0, 1, 1, 0, 0, 10),  # ext beyond header
        struct.pack(">hBhiiii", 1, 0, 1, 1, 0, 0, 3) + b"\0\5ab",  # key beyond block
        struct.pack(">hBhiiii", 1, 0, 1, 1, 0, 0, 1) + b"\0",  # truncated key length
        struct.pack(">hBhiiii", 1, 0, 1, 1, 0, 0, 8) + b"\0\1a\0\0\0\5b",  # value beyond
        struct.pack(">hBhiii", 1, 0, 1, 1, 0, 2) + b"\xff\xfe" + b"\0\0\0\0",  # bad UTF-8
    ],
)
def test_binary_bad_headers_raise_bad_header(header: bytes) -> None:
    with pytest.raises(BadHeaderError):
        RemotingCommand.decode(struct.pack(">i", (1 << 24) | len(header)) + header)


# --- msgpack --------------------------------------------------------------------------------


def test_msgpack_header_is_a_flat_array() -> None:
    cmd = RemotingCommand(310, opaque=3, ext_fields={"a": "b"}, serialize_type=2)
    frame = cmd.encode()
    assert frame[4] == 2
    assert msgpack.unpackb(frame[8:]) == [310, 0, 409, 3, 0, None, {"a": "b"}]


@pytest.mark.parametrize(
    "obj",
    [
        [1, 2, 3],
        {"code": 1},
        [1, 0, 409, 1, 0, None, {"a": 1}],
        [1, 0, 409, 1, 0, 5, None],
        [1, 300, 409, 1, 0, None, None],
        [1, 0, 409, 2**40, 0, None, None],
        [1, 0, 409, 1, 0, None, [1]],
        ["1", 0, 409, 1, 0, None, None],
    ],
)
def test_msgpack_bad_shapes_raise_bad_header(obj: object) -> None:
    raw = msgpack.packb(obj)
    with pytest.raises(BadHeaderError):
        RemotingCommand.decode(struct.pack(">i", (2 << 24) | len(raw)) + raw)


def test_msgpack_garbage_raises_bad_header() -> None:
    for raw in (b"\xc1", b"\x97\x01", b"\x92\x01\x02\x03", b"\xdd\xff\xff\xff\xff"):
        with pytest.raises(BadHeaderError):
            RemotingCommand.decode(struct.pack(">i", (2 << 24) | len(raw)) + raw)


# --- Hypothesis round trips -----------------------------------------------------------------

_int32 = st.integers(-(2**31), 2**31 - 1)
_short = st.integers(-(2**15), 2**15 - 1)
_text = st.text(max_size=30)
_nonempty = st.text(min_size=1, max_size=30)


@st.composite
def commands(draw: st.DrawFn, serialize_type: int) -> RemotingCommand:
    """Commands that each codec can carry (binary codes and versions are shorts)."""
    code = draw(_short if serialize_type == SerializeType.ROCKETMQ else _int32)
    version = draw(_short if serialize_type == SerializeType.ROCKETMQ else _int32)
    return RemotingCommand(
        code=code,
        language=draw(st.integers(0, 255)),
        version=version,
        opaque=draw(_int32),
        flag=draw(_int32),
        remark=draw(st.none() | _text),
        ext_fields=draw(st.none() | st.dictionaries(_text, _text, max_size=8)),
        body=draw(st.binary(max_size=64)),
        serialize_type=serialize_type,
    )


def _expected(cmd: RemotingCommand) -> RemotingCommand:
    """What decode(encode(cmd)) must give, after each codec's documented normalization."""
    ext = cmd.ext_fields
    if cmd.serialize_type == SerializeType.ROCKETMQ and ext is not None:
        ext = {k: v for k, v in ext.items() if k and v} or None
    if cmd.serialize_type == SerializeType.JSON and ext is None and cmd.flag & 1:
        ext = {}
    return RemotingCommand(
        cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark or None, ext,
        bytes(cmd.body), cmd.serialize_type,
    )  # fmt: skip


def _round_trip(cmd: RemotingCommand) -> RemotingCommand:
    frame = cmd.encode()
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    back = RemotingCommand.decode(frame[4:])
    back.body = bytes(back.body)
    return back


@given(commands(SerializeType.JSON))
def test_round_trip_json(cmd: RemotingCommand) -> None:
    assert _round_trip(cmd) == _expected(cmd)


@given(commands(SerializeType.ROCKETMQ))
def test_round_trip_binary(cmd: RemotingCommand) -> None:
    assert _round_trip(cmd) == _expected(cmd)


@given(commands(SerializeType.MSGPACK))
def test_round_trip_msgpack(cmd: RemotingCommand) -> None:
    assert _round_trip(cmd) == _expected(cmd)


@given(commands(SerializeType.JSON), st.sampled_from(list(SerializeType)))
def test_response_round_trip_in_request_serialize_type(req: RemotingCommand, st_: int) -> None:
    req.serialize_type = st_
    resp = req.make_response(ResponseCode.SUCCESS, ext_fields={"offset": "12"})
    back = _round_trip(resp)
    assert (back.serialize_type, back.opaque, back.flag) == (st_, req.opaque, 1)
    assert back.ext_fields == {"offset": "12"}


def _body(frame: bytes) -> memoryview:
    """A frame as the RemotingServer holds it: without its total length, as a view."""
    return memoryview(frame)[4:]


def test_response_opaque_tells_answers_from_requests_as_decode_does() -> None:
    """response_opaque (the RemotingServer's look at frames on a connection with calls open)
    agrees with decode in every serialization, whatever precedes the header's own flag."""
    from protocol.command import response_opaque

    for st_ in (0, 1, 2):
        req = RemotingCommand.request(10, {"a": "1"}, b"x", serialize_type=st_)
        assert response_opaque(_body(req.encode())) is None
        resp = req.make_response(0, None, {"flag": "0"})
        assert response_opaque(_body(resp.encode())) == req.opaque
    # a compact JSON answer whose extFields has a numeric "flag" ahead of the header's
    head = b'{"code":0,"extFields":{"flag":0},"flag":1,"opaque":5}'
    frame = struct.pack(">ii", 4 + len(head), len(head)) + head
    assert RemotingCommand.decode(_body(frame)).flag == 1
    assert response_opaque(_body(frame)) == 5
    # a ROCKETMQ header shorter than its fixed part: decode refuses it, so no answer either
    # (a 4-byte header; the bytes after it, body bytes, would read as a response's fixed part)
    short = struct.pack(">hbhiii", 0, 0, 0, 9, 1, 0)
    frame = struct.pack(">ii", 4 + len(short), (1 << 24) | 4) + short
    with pytest.raises(BadHeaderError):
        RemotingCommand.decode(_body(frame))
    assert response_opaque(_body(frame)) is None
