"""Arbitrary bytes either decode or raise ProtocolError: Hypothesis plus a seeded fuzz loop."""

from __future__ import annotations

import random
import struct
import time

from hypothesis import given
from hypothesis import strategies as st

from protocol import headers as h
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError, ProtocolError
from protocol.framing import FrameDecoder

FUZZ_INPUTS = 100_000
FUZZ_TIME_LIMIT_S = 60.0
SEED = 0x5EED_2024


def _corpus() -> list[bytes]:
    send_v2 = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0",
               "g": "1795303321205", "h": "0", "i": "TAGS\x01A\x02KEYS\x01k", "j": "0",
               "k": "false", "m": "true"}  # fmt: skip
    pull = {"consumerGroup": "CG", "topic": "T", "queueId": "0", "queueOffset": "0",
            "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0", "subVersion": "1",
            "suspendTimeoutMillis": "15000", "subscription": "*"}  # fmt: skip
    out = []
    for st_ in (0, 1, 2):
        out.append(RemotingCommand.request(310, send_v2, b"b" * 40, opaque=1,
                                           serialize_type=st_).encode())  # fmt: skip
        out.append(RemotingCommand.request(11, pull, opaque=2, serialize_type=st_).encode())
        out.append(RemotingCommand.request(34, None, b"{}", opaque=3, serialize_type=st_).encode())
        out.append(
            RemotingCommand(0, opaque=1, flag=1, remark="ok", serialize_type=st_,
                            ext_fields={"msgId": "AB", "queueId": "1", "queueOffset": "0"})
            .encode()
        )  # fmt: skip
    # ali-ons style numbers/booleans and a C++ style trailing newline.
    raw = (b'{"code":310,"language":"JAVA","opaque":1,"flag":0,"version":121,'
           b'"extFields":{"a":"PG","b":"T","c":"TBW102","d":4,"e":1,"f":0,"g":1,"h":0,'
           b'"k":false}}\n')  # fmt: skip
    out.append(struct.pack(">ii", 4 + len(raw), len(raw)) + raw)
    return out


def _check(data: bytes) -> int:
    """Feed `data` to a fresh decoder; anything but ProtocolError fails the test."""
    decoded = 0
    try:
        cmds = FrameDecoder(max_frame_size=1 << 20).feed_commands(data)
    except ProtocolError:
        cmds = []
    for cmd in cmds:
        decoded += 1
        assert isinstance(cmd.code, int) and isinstance(cmd.opaque, int)
        assert cmd.ext_fields is None or all(
            type(k) is str and type(v) is str for k, v in cmd.ext_fields.items()
        )
        try:
            h.decode_request_header(cmd.code, cmd.ext_fields)
        except HeaderFieldError:
            pass
    if len(data) >= 4:
        try:
            RemotingCommand.decode(data[4:])
        except ProtocolError:
            pass
    return decoded


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    b = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        if op == 0 and b:  # flip a bit
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # random byte
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2 and b:  # truncate
            del b[rng.randrange(len(b)) :]
        elif op == 3:  # insert junk
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.randbytes(rng.randint(1, 8))
        elif op == 4 and len(b) >= 8:  # serialize type byte
            b[4] = rng.choice((0, 1, 2, 3, 0xFF))
        elif op == 5 and len(b) >= 8:  # header length
            struct.pack_into(">I", b, 4, (b[4] << 24) | rng.randrange(1 << 24))
        elif op == 6 and len(b) >= 4:  # total length
            struct.pack_into(">i", b, 0, rng.randint(-(2**31), 2**31 - 1))
        elif op == 7 and len(b) > 12:  # drop a slice inside the header
            i = rng.randrange(8, len(b))
            del b[i : i + rng.randint(1, 6)]
    return bytes(b)


def test_seeded_fuzz_loop_only_protocol_errors() -> None:
    rng = random.Random(SEED)
    corpus = _corpus()
    start = time.monotonic()
    decoded = 0
    for i in range(FUZZ_INPUTS):
        if i % 8 == 0:
            data = rng.randbytes(rng.randint(0, 64))
        elif i % 8 == 1:  # plausible length prefix + random tail
            tail = rng.randbytes(rng.randint(0, 60))
            data = struct.pack(">ii", 4 + len(tail), rng.choice((0, 1, 2)) << 24 | len(tail))
            data += tail
        else:
            data = _mutate(rng, rng.choice(corpus))
        decoded += _check(data)
        assert time.monotonic() - start < FUZZ_TIME_LIMIT_S, f"fuzz too slow at input {i}"
    assert decoded > 1000  # the mutations keep many inputs decodable, not just errors


def test_pathological_inputs() -> None:
    deep = b"[" * 100_000
    for header, st_ in ((deep, 0), (b'{"a":' * 50_000, 0), (b"\x91" * 100_000, 2)):
        frame = struct.pack(">ii", 4 + len(header), (st_ << 24) | len(header)) + header
        assert _check(frame) == 0


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    _check(data)


@given(st.integers(-(2**31), 2**31 - 1), st.integers(0, 3), st.binary(max_size=120))
def test_framed_arbitrary_headers(total_delta: int, st_: int, header: bytes) -> None:
    frame = struct.pack(">ii", 4 + len(header), (st_ << 24) | len(header)) + header
    _check(frame)
    _check(struct.pack(">i", total_delta) + frame[4:])


@given(
    st.sampled_from(sorted(h.REQUEST_HEADERS)),
    st.dictionaries(st.text(max_size=25), st.text(max_size=12), max_size=12),
)
def test_headers_from_arbitrary_ext_raise_only_header_field_error(code: int, ext: dict) -> None:
    try:
        h.decode_request_header(code, ext)
    except HeaderFieldError as exc:
        assert exc.remark.startswith("the custom field <")
