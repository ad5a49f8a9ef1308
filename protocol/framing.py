"""FrameDecoder: split a byte stream into RemotingCommand frames, sans IO.

Mirrors remoting/netty/NettyDecoder.java (a LengthFieldBasedFrameDecoder with a 4-byte length,
stripped), RocketMQ 4.9.x. The caller owns the socket and feeds whatever it read::

    dec = FrameDecoder()
    for cmd in dec.feed_commands(chunk):
        dispatch(cmd)

Limits: a frame, the 4-byte length field included, may not exceed `max_frame_size` (16 MiB, as
Java's `com.rocketmq.remoting.frameMaxLength`). An oversized or negative length is reported as
soon as the 4 length bytes arrive, before any of the frame is buffered. Only ProtocolError
subclasses are raised; after one the decoder is unusable and the connection should be closed.

Buffering: frames are returned as memoryview slices of an immutable bytes object (no copy per
frame). Bytes of an incomplete frame are kept in a bytearray and copied once, when the frame
completes, so feeding a stream costs O(n) whatever the chunking.
"""

from __future__ import annotations

import logging
import struct
from typing import Final

from protocol.command import RemotingCommand
from protocol.errors import BadFrameLengthError, FrameTooLargeError, ProtocolError

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "FrameDecoder", "frame_size"]

DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024  # includes the 4-byte length field
LENGTH_FIELD_SIZE: Final = 4
MIN_TOTAL_LENGTH: Final = 4  # the header-length word must fit
_I32 = struct.Struct(">i")


def frame_size(total: int, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> int:
    """The whole size on the wire of a frame whose length field reads `total` (signed, as
    Java's int); BadFrameLengthError / FrameTooLargeError when no frame can be that long.
    Every reader of the stream (this decoder, the pull rings, the shared pull connections)
    applies this one rule."""
    if total < MIN_TOTAL_LENGTH:
        raise BadFrameLengthError(f"bad frame length {total}")
    size = total + LENGTH_FIELD_SIZE
    if size > max_frame_size:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds the limit of {max_frame_size}")
    return size


class FrameDecoder:
    """Incremental frame splitter bounded by `max_frame_size`."""

    __slots__ = ("_buf", "_error", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < LENGTH_FIELD_SIZE + MIN_TOTAL_LENGTH:
            raise ValueError(f"max_frame_size too small: {max_frame_size}")
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        # Bytes needed in _buf before it can yield a frame (4 until the length is known).
        self._need = LENGTH_FIELD_SIZE
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Add received bytes; return every completed frame without its length field."""
        if self._error is not None:
            raise self._error
        try:
            return self._feed(data)
        except ProtocolError as exc:
            self._error = exc
            self._buf = bytearray()
            log.debug("frame decoder failed: %s", exc)
            raise

    def _feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < self._need:
                return []
            if self._need == LENGTH_FIELD_SIZE:  # the length just became readable
                (total,) = _I32.unpack_from(buf, 0)
                self._need = frame_size(total, self.max_frame_size)
                if len(buf) < self._need:
                    return []
            chunk: bytes = bytes(buf)
            self._buf = bytearray()
        else:
            if not data:
                return []
            chunk = data if type(data) is bytes else bytes(data)
        self._need = LENGTH_FIELD_SIZE
        return self._split(chunk)

    def _split(self, chunk: bytes) -> list[memoryview]:
        """Cut whole frames out of `chunk`; buffer the incomplete tail."""
        mv = memoryview(chunk)
        n = len(chunk)
        pos = 0
        frames: list[memoryview] = []
        unpack = _I32.unpack_from
        max_size = self.max_frame_size
        while n - pos >= LENGTH_FIELD_SIZE:
            (total,) = unpack(chunk, pos)
            size = total + LENGTH_FIELD_SIZE
            if total < MIN_TOTAL_LENGTH or size > max_size:
                frame_size(total, max_size)  # raises the precise error
            if n - pos < size:
                self._need = size
                break
            frames.append(mv[pos + LENGTH_FIELD_SIZE : pos + size])
            pos += size
        if pos < n:
            self._buf = bytearray(mv[pos:])
        return frames

    def feed_commands(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Add received bytes; return every completed frame decoded as a RemotingCommand."""
        frames = self.feed(data)
        if not frames:
            return []
        try:
            return [RemotingCommand.decode(f) for f in frames]
        except ProtocolError as exc:
            self._error = exc
            self._buf = bytearray()
            raise
