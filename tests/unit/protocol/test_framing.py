"""FrameDecoder: chunking, limits, and one clear ProtocolError per kind of bad input."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.command import RemotingCommand
from protocol.errors import (
    BadFrameLengthError,
    BadHeaderError,
    BadHeaderLengthError,
    FrameTooLargeError,
    ProtocolError,
    UnknownSerializeTypeError,
)
from protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameDecoder


def _cmds() -> list[RemotingCommand]:
    return [
        RemotingCommand.request(105, {"topic": "T"}, opaque=1),
        RemotingCommand.request(310, {"a": "pg", "b": "T"}, b"x" * 300, opaque=2, serialize_type=1),
        RemotingCommand(0, opaque=2, flag=1, ext_fields={"q": "1"}, body=b"", serialize_type=2),
        RemotingCommand.request(34, None, b'{"clientID":"c"}', opaque=3, oneway=True),
    ]


def _stream() -> bytes:
    return b"".join(c.encode() for c in _cmds())


def _norm(cmds: list[RemotingCommand]) -> list[tuple]:
    return [(c.code, c.opaque, c.flag, c.ext_fields, bytes(c.body), c.serialize_type) for c in cmds]


def test_default_limit_is_16_mib_including_length_field() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 16 * 1024 * 1024
    dec = FrameDecoder()
    with pytest.raises(FrameTooLargeError):
        dec.feed(struct.pack(">i", DEFAULT_MAX_FRAME_SIZE - 3))
    ok = FrameDecoder()
    assert ok.feed(struct.pack(">i", DEFAULT_MAX_FRAME_SIZE - 4)) == []  # exactly at the limit


def test_whole_stream_in_one_chunk() -> None:
    frames = FrameDecoder().feed(_stream())
    assert len(frames) == 4
    assert all(isinstance(f, memoryview) for f in frames)
    assert _norm([RemotingCommand.decode(f) for f in frames]) == _norm(_cmds())


def test_byte_at_a_time() -> None:
    dec = FrameDecoder()
    out: list[RemotingCommand] = []
    data = _stream()
    for i in range(len(data)):
        out.extend(dec.feed_commands(data[i : i + 1]))
    assert _norm(out) == _norm(_cmds())
    assert dec.buffered == 0


def test_accepts_bytearray_and_memoryview_and_copies_them() -> None:
    data = bytearray(_stream())
    dec = FrameDecoder()
    frames = dec.feed(memoryview(data)[:10]) + dec.feed(memoryview(data)[10:])
    data[:] = b"\0" * len(data)  # caller reuses its receive buffer
    assert _norm([RemotingCommand.decode(f) for f in frames]) == _norm(_cmds())


def test_large_frame_in_chunks() -> None:
    cmd = RemotingCommand.request(310, {"a": "b"}, b"z" * (3 * 1024 * 1024), opaque=9)
    data = cmd.encode()
    dec = FrameDecoder()
    out = []
    for i in range(0, len(data), 65536):
        out.extend(dec.feed_commands(data[i : i + 65536]))
    assert len(out) == 1 and bytes(out[0].body) == cmd.body


@given(st.lists(st.integers(0, 2000), max_size=12))
def test_random_split_points_give_same_commands(cuts: list[int]) -> None:
    data = _stream()
    points = sorted({c % (len(data) + 1) for c in cuts})
    dec = FrameDecoder()
    out: list[RemotingCommand] = []
    prev = 0
    for p in [*points, len(data)]:
        out.extend(dec.feed_commands(data[prev:p]))
        prev = p
    assert _norm(out) == _norm(_cmds())


@pytest.mark.parametrize("total", [-1, -(2**31), 0, 3])
def test_negative_or_tiny_length(total: int) -> None:
    with pytest.raises(BadFrameLengthError):
        FrameDecoder().feed(struct.pack(">i", total))


def test_oversized_is_reported_before_buffering_the_frame() -> None:
    dec = FrameDecoder(max_frame_size=1024)
    dec.feed(b"\x00\x00")
    with pytest.raises(FrameTooLargeError):
        dec.feed(struct.pack(">i", 2000)[2:])
    assert dec.buffered == 0


def test_error_is_sticky() -> None:
    dec = FrameDecoder()
    with pytest.raises(BadFrameLengthError):
        dec.feed(struct.pack(">i", -5))
    with pytest.raises(BadFrameLengthError):
        dec.feed(_stream())


def _frame(meta: int, header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), meta) + header


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (_frame(100, b"{}"), BadHeaderLengthError),
        (_frame((5 << 24) | 2, b"{}"), UnknownSerializeTypeError),
        (_frame(3, b"{x}"), BadHeaderError),
        (_frame((1 << 24) | 5, b"\0\1\0\0\0"), BadHeaderError),
        (_frame((2 << 24) | 1, b"\xc1"), BadHeaderError),
    ],
)
def test_bad_headers_in_stream(data: bytes, error: type[ProtocolError]) -> None:
    dec = FrameDecoder()
    with pytest.raises(error):
        dec.feed_commands(data)
    with pytest.raises(ProtocolError):  # unusable afterwards
        dec.feed_commands(_stream())


def test_json_frames_from_stream_with_top_byte_masked() -> None:
    header = json.dumps({"code": 105, "extFields": {"topic": "T"}}).encode()
    dec = FrameDecoder()
    [cmd] = dec.feed_commands(_frame(len(header), header))
    assert cmd.ext_fields == {"topic": "T"}
