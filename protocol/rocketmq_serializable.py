"""The ROCKETMQ binary header codec of RemotingCommand (serialize type 1).

Mirrors remoting/protocol/RocketMQSerializable.java (rocketMQProtocolEncode /
rocketMQProtocolDecode, mapSerialize / mapDeserialize), RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging
import struct
from typing import Any, Final

from protocol.errors import (
    BadHeaderError,
)
from protocol.header_fields import HeaderFields

log = logging.getLogger(__name__)


BIN_FIXED = struct.Struct(
    ">h"  # code
    "B"  # language
    "h"  # version
    "i"  # opaque
    "i"  # flag
    "i"  # remark_len
)
BIN_FIXED_SIZE: Final = BIN_FIXED.size  # 17
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
BIN_MIN_HEADER_SIZE: Final = BIN_FIXED_SIZE + _I32.size  # 21


def decode_binary_header(header: memoryview) -> tuple[int, int, int, int, int, Any, Any]:
    # One copy of the (small) header to bytes: unpack_from and slice+decode on bytes measured
    # about 2x faster than on a memoryview here (no view object per field).
    hb = bytes(header)
    hlen = len(hb)
    if hlen < BIN_MIN_HEADER_SIZE:
        raise BadHeaderError(f"truncated binary header: {hlen} bytes")
    code, language, version, opaque, flag, rlen = BIN_FIXED.unpack_from(hb, 0)
    pos = BIN_FIXED_SIZE
    if rlen < 0 or rlen > hlen - BIN_MIN_HEADER_SIZE:
        raise BadHeaderError(f"binary header remark length {rlen} out of range")
    i16 = _I16.unpack_from
    i32 = _I32.unpack_from
    try:
        remark = hb[pos : pos + rlen].decode() if rlen else None
        pos += rlen
        (elen,) = i32(hb, pos)
        pos += 4
        if elen < 0 or elen > hlen - pos:
            raise BadHeaderError(f"binary header ext length {elen} out of range")
        ext: dict[str, str] | None = None
        if elen:
            ext = {}
            end = pos + elen
            while pos < end:
                if end - pos < 6:
                    raise BadHeaderError("truncated binary header map entry")
                (klen,) = i16(hb, pos)
                kpos = pos + 2
                pos = kpos + klen
                if klen < 0 or pos > end - 4:
                    raise BadHeaderError(f"binary header map key length {klen} out of range")
                (vlen,) = i32(hb, pos)
                vpos = pos + 4
                pos = vpos + vlen
                if vlen < 0 or pos > end:
                    raise BadHeaderError(f"binary header map value length {vlen} out of range")
                if klen and vlen:  # Java reads empty strings as null; null means absent
                    ext[hb[kpos : kpos + klen].decode()] = hb[vpos:pos].decode()
    except UnicodeDecodeError as exc:
        raise BadHeaderError(f"binary header string is not UTF-8: {exc}") from None
    return code, language, version, opaque, flag, remark, ext


def encode_binary_header(cmd: HeaderFields) -> bytes:
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts: list[bytes] = []
    ext = cmd.ext_fields
    if ext:
        for k, v in ext.items():
            if not k or not v:  # null or empty: Java would read it back as null anyway
                continue
            kb = k.encode("utf-8")
            vb = v.encode("utf-8")
            parts.append(_I16.pack(len(kb)))
            parts.append(kb)
            parts.append(_I32.pack(len(vb)))
            parts.append(vb)
    ext_block = b"".join(parts)
    return b"".join(
        (
            BIN_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, len(remark)),
            remark,
            _I32.pack(len(ext_block)),
            ext_block,
        )
    )
