"""RemotingCommand: the frame, and the header codecs picked by serialize type.

Mirrors remoting/protocol/RemotingCommand.java, RocketMQ 4.9.x. The JSON header codec lives in
protocol/remoting_serializable.py, the ROCKETMQ binary one in protocol/rocketmq_serializable.py;
the msgpack one (ours) is here.

Frame (big-endian)::

    off  size  field
    0    4     total_length   4 + header_length + body_length (not counting itself)
    4    4     header_meta    serialize_type << 24 | header_length (low 24 bits)
    8    H     header         JSON text, ROCKETMQ binary or msgpack (ours)
    8+H  B     body           opaque bytes

JSON header (type 0): what fastjson writes, compact, keys alphabetical, nulls omitted::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,
     "serializeTypeCurrentRPC":"JSON","version":409}

ROCKETMQ binary header (type 1)::

    off    size  field
    0      2     code        short
    2      1     language    byte
    3      2     version     short
    5      4     opaque      int
    9      4     flag        int
    13     4     remark_len  int (0 => null)
    17     R     remark      UTF-8
    17+R   4     ext_len     int, byte length of the map block (0 => no extFields)
    21+R   E     entries     short key_len, key, int val_len, value (UTF-8; empty => null)

MSGPACK header (type 2, ours): one flat array, no keys::

    [code, language, version, opaque, flag, remark | nil, {key: value} | nil]

Decoding is strict about shapes (a wrong shape is BadHeaderError) and lenient about what real
clients send (ali-ons and C++ put numbers and booleans into extFields; C++ sends remark "").
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import secrets
import struct
from dataclasses import dataclass
from typing import Final

import msgpack

from protocol.codes import (
    CURRENT_VERSION,
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    LanguageCode,
    ResponseCode,
    SerializeType,
)
from protocol.errors import (
    BadHeaderError,
    BadHeaderLengthError,
    ProtocolError,
    UnknownSerializeTypeError,
)
from protocol.remoting_serializable import decode_json_header, encode_json_header, json_string
from protocol.rocketmq_serializable import (
    BIN_FIXED,
    BIN_MIN_HEADER_SIZE,
    decode_binary_header,
    encode_binary_header,
)

log = logging.getLogger(__name__)

__all__ = ["RemotingCommand", "ResponseTemplate", "next_opaque", "request_parts"]

_PREFIX = struct.Struct(">ii")  # total_length, header_meta
_META = struct.Struct(">i")  # header_meta alone (decode sees the frame after total_length)
_MSGPACK_INTS = struct.Struct(">iBiii")  # code, language, version, opaque, flag: validation only

HEADER_LENGTH_MASK: Final = 0xFFFFFF
# Plain ints for dispatch on the hot path (comparing with IntEnum members costs more).
_JSON: Final = int(SerializeType.JSON)
_ROCKETMQ: Final = int(SerializeType.ROCKETMQ)
_MSGPACK: Final = int(SerializeType.MSGPACK)

_opaque_counter = itertools.count(1)


def _reseed_opaques() -> None:
    """A forked process (an actor) counts from its own random start: two processors calling
    the same client then do not share opaques, which route the client's answers back."""
    global _opaque_counter
    _opaque_counter = itertools.count(secrets.randbelow(1 << 30) + 1)


os.register_at_fork(after_in_child=_reseed_opaques)


def next_opaque() -> int:
    """Next request id from the process-wide counter (wraps inside the int32 range)."""
    return next(_opaque_counter) & 0x7FFFFFFF


_msgpack_packb = msgpack.Packer(use_bin_type=True, autoreset=True).pack
_msgpack_unpackb = msgpack.unpackb




def _encode_msgpack_header(cmd: RemotingCommand) -> bytes:
    return _msgpack_packb(
        [cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields]
    )


@dataclass(slots=True)
class RemotingCommand:
    """One request or response: the header fields plus an uninterpreted body."""

    code: int
    language: int = LanguageCode.JAVA
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None  # values always str after decode
    body: bytes | memoryview = b""
    serialize_type: int = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """True when flag bit 0 (RPC_TYPE) is set."""
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True when flag bit 1 (RPC_ONEWAY) is set: never answer it."""
        return bool(self.flag & RPC_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | memoryview = b"",
        *,
        oneway: bool = False,
        serialize_type: int = SerializeType.JSON,
        opaque: int | None = None,
    ) -> RemotingCommand:
        """A new request; opaque=None takes the next process-wide request id."""
        return cls(
            code,
            LanguageCode.JAVA,
            CURRENT_VERSION,
            next_opaque() if opaque is None else opaque,
            RPC_ONEWAY if oneway else 0,
            None,
            ext_fields,
            body,
            serialize_type,
        )

    def make_response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | memoryview = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque and serialize type, response flag set."""
        return RemotingCommand(
            code,
            LanguageCode.JAVA,
            CURRENT_VERSION,
            self.opaque,
            RPC_TYPE_RESPONSE,
            remark,
            ext_fields,
            body,
            self.serialize_type,
        )

    def _header_bytes(self) -> bytes:
        st = self.serialize_type
        try:
            if st == _MSGPACK:
                return _encode_msgpack_header(self)
            if st == _JSON:
                return encode_json_header(self)
            if st == _ROCKETMQ:
                return encode_binary_header(self)
        except (struct.error, TypeError, ValueError, OverflowError) as exc:
            raise ProtocolError(f"cannot encode command code={self.code}: {exc}") from exc
        raise UnknownSerializeTypeError(f"cannot encode serialize type {st}")

    def encode_header(self) -> bytes:
        """Length prefix + header_meta + header; the body is to be written right after."""
        header = self._header_bytes()
        hlen = len(header)
        if hlen > HEADER_LENGTH_MASK:
            raise ProtocolError(f"header too long to frame: {hlen} bytes")
        return _PREFIX.pack(4 + hlen + len(self.body), (self.serialize_type << 24) | hlen) + header

    def encode(self) -> bytes:
        """The whole frame, the 4-byte total length included."""
        if self.serialize_type == _MSGPACK:
            # Our own fast path: one pack call, no dispatch on the serialize type.
            try:
                header = _encode_msgpack_header(self)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ProtocolError(f"cannot encode command code={self.code}: {exc}") from exc
        else:
            header = self._header_bytes()
        hlen = len(header)
        if hlen > HEADER_LENGTH_MASK:
            raise ProtocolError(f"header too long to frame: {hlen} bytes")
        body = self.body
        prefix = _PREFIX.pack(4 + hlen + len(body), (self.serialize_type << 24) | hlen)
        if body:
            return b"".join((prefix, header, body))
        return prefix + header

    @classmethod
    def decode(cls, frame: bytes | memoryview) -> RemotingCommand:
        """Decode one frame without its 4-byte total length (as Netty strips it)."""
        mv = frame if type(frame) is memoryview else memoryview(frame)
        flen = len(mv)
        if flen < 4:
            raise BadHeaderLengthError(f"frame of {flen} bytes has no header length")
        (meta,) = _META.unpack_from(mv, 0)
        st, hlen = split_header_word(meta, flen)
        end = 4 + hlen
        return cls.from_header(st, mv[4:end], mv[end:] if end < flen else b"")

    @classmethod
    def from_header(cls, st: int, header: bytes | memoryview, body: bytes | memoryview
                    ) -> RemotingCommand:  # fmt: skip
        """The command of a header in serialize type `st` (the top byte of the frame's
        header-length word) and its body (kept as given: a reader that read the body into
        a buffer of its own hands that buffer over)."""
        if st == _MSGPACK:
            # Our own fast path, inlined: no helper call, no intermediate tuple.
            try:
                h = _msgpack_unpackb(header)
            except Exception as exc:  # msgpack raises many types on malformed input
                raise BadHeaderError(f"bad msgpack header: {exc!r}") from None
            if type(h) is not list or len(h) != 7:
                raise BadHeaderError("msgpack header is not a 7-element array")
            code, language, version, opaque, flag, remark, ext = h
            try:
                _MSGPACK_INTS.pack(code, language, version, opaque, flag)
                if remark is not None:
                    remark.encode()
                if ext is not None:
                    "".join([*ext, *ext.values()])
            except (struct.error, AttributeError, TypeError, UnicodeEncodeError):
                raise BadHeaderError(
                    f"msgpack header field of the wrong type: {h!r:.200}"
                ) from None
            return cls(code, language, version, opaque, flag, remark or None, ext, body, st)
        if st == _JSON:
            fields = decode_json_header(header)
        elif st == _ROCKETMQ:
            fields = decode_binary_header(
                header if type(header) is memoryview else memoryview(header))
        else:
            raise UnknownSerializeTypeError(f"unknown serialize type {st}")
        code, language, version, opaque, flag, remark, ext = fields
        return cls(code, language, version, opaque, flag, remark, ext, body, st)


def split_header_word(word: int, frame_len: int) -> tuple[int, int]:
    """(serialize type, header length) of a frame's header-length word, the frame being
    frame_len bytes without its total length; BadHeaderLengthError when the header does not
    fit in it. Every reader of a frame applies this one rule."""
    hlen = word & HEADER_LENGTH_MASK
    if 4 + hlen > frame_len:
        raise BadHeaderLengthError(f"header length {hlen} exceeds frame of {frame_len} bytes")
    return (word >> 24) & 0xFF, hlen


_JSON_FLAG = re.compile(rb'"flag":(-?[0-9]{1,10})[,}]')
_JSON_EXT = re.compile(rb'"extFields"')


def response_opaque(frame: memoryview | bytes) -> int | None:
    """The opaque of a frame (without its total length) that is a response, None for a request
    or a header that does not read; no RemotingCommand built, and a request told apart before
    any full header decode where its flag sits where it can be seen (the JSON "flag" member,
    the binary header's fixed field)."""
    try:
        (meta,) = _META.unpack_from(frame, 0)
        st = (meta >> 24) & 0xFF
        end = 4 + (meta & HEADER_LENGTH_MASK)
        if end > len(frame):
            return None
        if st == _ROCKETMQ:
            if end - 4 < BIN_MIN_HEADER_SIZE:  # decode refuses it: not an answer to anything
                return None
            _c, _l, _v, opaque, flag, _r = BIN_FIXED.unpack_from(frame, 4)
            return int(opaque) if flag & RPC_TYPE_RESPONSE else None
        if st == _JSON:
            m = _JSON_FLAG.search(frame, 4, end)
            # trusted only ahead of extFields (whose members may be named "flag" too)
            if (
                m is not None
                and not int(m.group(1)) & RPC_TYPE_RESPONSE
                and _JSON_EXT.search(frame, 4, m.start()) is None
            ):
                return None
            _c, _l, _v, opaque, flag, _r, _e = decode_json_header(frame[4:end])
        elif st == _MSGPACK:
            h = _msgpack_unpackb(frame[4:end])
            opaque, flag = h[3], h[4]
        else:
            return None
        return int(opaque) if flag & RPC_TYPE_RESPONSE else None
    except Exception:  # unreadable: the caller's normal path reports it
        return None


def request_parts(
    frame: memoryview, code: int
) -> tuple[int, dict[str, str], memoryview | bytes, int] | None:
    """(opaque, extFields, body, serialize type) of a well-formed two-way request `code` with
    extFields, in a JSON or msgpack header; None for anything else (decode then decides).

    The fast path's reader: no RemotingCommand is built. Accepts exactly what decode accepts
    for such a request (a msgpack remark, unusual on a request, is left to decode).
    """
    flen = len(frame)
    if flen < 4:
        return None
    (meta,) = _META.unpack_from(frame, 0)
    st = (meta >> 24) & 0xFF
    end = 4 + (meta & HEADER_LENGTH_MASK)
    if end > flen:
        return None
    try:
        if st == _MSGPACK:
            h = _msgpack_unpackb(frame[4:end])
            if type(h) is not list or len(h) != 7 or h[5] is not None:
                return None
            c, language, version, opaque, flag, _, ext = h
            _MSGPACK_INTS.pack(c, language, version, opaque, flag)
            if type(ext) is not dict:
                return None
            "".join([*ext, *ext.values()])  # str keys and values only
        elif st == _JSON:
            c, _, _, opaque, flag, _, ext = decode_json_header(frame[4:end])
        else:
            return None
    except Exception:  # malformed: decode raises the right error on the general path
        return None
    if c != code or flag != 0 or ext is None:
        return None
    return opaque, ext, frame[end:] if end < flen else b"", st


class ResponseTemplate:
    """A SUCCESS response's header with fixed extFields keys (and remark), pre-rendered: only
    the opaque and the `variable` values change between uses (the send path, a pull's FOUND).
    JSON: a format string; msgpack: the array the generic encoder writes (variable keys first,
    then the constants)."""

    __slots__ = ("const", "fmt", "fmt_plain", "nkeys", "plain_order", "remark", "variable")

    def __init__(self, const: dict[str, str], variable: tuple[str, ...],
                 remark: str | None = None) -> None:  # fmt: skip
        self.variable = variable
        self.const = tuple(const.items())
        self.nkeys = len(const) + len(variable)
        self.remark = remark
        remark_part = ""  # the generic encoder writes no member for an empty remark either
        if remark:
            remark_part = ('"remark":' + json_string(remark)).replace("{", "{{").replace(
                "}", "}}") + ","  # fmt: skip

        def lit(text: str) -> str:
            return json_string(text).replace("{", "{{").replace("}", "}}")

        def render(slot: str) -> str:
            members = [
                lit(key) + ":" + (lit(const[key]) if key in const else slot % variable.index(key))
                for key in sorted((*const, *variable))
            ]
            return (
                '{{"code":0,"extFields":{{' + ",".join(members) + '}},"flag":1,"language":"JAVA",'
                f'"opaque":{{{len(variable)}:d}},{remark_part}"serializeTypeCurrentRPC":"JSON",'
                f'"version":{CURRENT_VERSION:d}}}}}'
            )

        self.fmt = render("{%d}")  # the values go in JSON-quoted
        # values known to need no escaping go in as they are, by %-formatting (half the cost
        # of str.format's field parsing on the send path's every reply)
        pct_remark = ('"remark":' + json_string(remark) + ",").replace("%", "%%") if remark else ""
        pct_members = [
            json_string(key).replace("%", "%%") + ":"
            + (json_string(const[key]).replace("%", "%%") if key in const else '"%s"')
            for key in sorted((*const, *variable))
        ]  # fmt: skip
        self.fmt_plain = (
            '{"code":0,"extFields":{' + ",".join(pct_members) + '},"flag":1,"language":"JAVA",'
            f'"opaque":%d,{pct_remark}"serializeTypeCurrentRPC":"JSON",'
            f'"version":{CURRENT_VERSION:d}}}'
        )
        # where each %s of fmt_plain takes its value from (None: in `variable`'s order)
        order = tuple(variable.index(k) for k in sorted((*const, *variable)) if k in variable)
        self.plain_order = None if order == tuple(range(len(variable))) else order

    def header(self, opaque: int, ext: dict[str, str]) -> bytes:
        """The JSON header for these ext values (each variable one JSON-quoted)."""
        quote = json_string
        return self.fmt.format(*[quote(ext[k]) for k in self.variable], opaque).encode()

    def frame(self, serialize_type: int, opaque: int, values: tuple[str, ...]) -> bytes:
        """The whole response frame (no body) for the variable keys' `values`, in order."""
        if serialize_type == _MSGPACK:
            ext = dict(zip(self.variable, values, strict=True))
            ext.update(self.const)
            header = _msgpack_packb([0, 0, CURRENT_VERSION, opaque, RPC_TYPE_RESPONSE,
                                     self.remark, ext])  # fmt: skip
            return _PREFIX.pack(4 + len(header), (_MSGPACK << 24) | len(header)) + header
        if serialize_type != _JSON:
            raise UnknownSerializeTypeError(f"no template for serialize type {serialize_type}")
        quote = json_string
        header = self.fmt.format(*[quote(v) for v in values], opaque).encode()
        return _PREFIX.pack(4 + len(header), len(header)) + header

    def frame_plain(self, serialize_type: int, opaque: int, values: tuple[str, ...]) -> bytes:
        """frame() for values made only of characters JSON writes as they are (digits, hex,
        '-'): no escaping pass."""
        if serialize_type != _JSON:
            return self.frame(serialize_type, opaque, values)
        header = self.header_plain(opaque, values)
        return _PREFIX.pack(4 + len(header), len(header)) + header

    def header_plain(self, opaque: int, values: tuple[object, ...]) -> bytes:
        """The JSON header for `values` (in `variable`'s order) that need no escaping: strs of
        digits, hex or '-', or ints."""
        order = self.plain_order
        if order is not None:
            values = tuple(values[i] for i in order)
        return (self.fmt_plain % (*values, opaque)).encode()


class TemplatedResponse(RemotingCommand):
    """A RemotingCommand whose JSON encoding comes from a ResponseTemplate while it still looks
    like the response the template was made for (SUCCESS, its remark, the template's keys)."""

    __slots__ = ("template",)
    template: ResponseTemplate

    def encode(self) -> bytes:
        """The whole frame; the generic encoder unless the template still applies."""
        tpl: ResponseTemplate = self.template
        ext = self.ext_fields
        if (
            self.serialize_type == _JSON
            and self.code == 0
            and self.remark == tpl.remark
            and self.flag == RPC_TYPE_RESPONSE
            and ext is not None
            and len(ext) == tpl.nkeys
        ):
            header = tpl.header(self.opaque, ext)
            body = self.body
            prefix = _PREFIX.pack(4 + len(header) + len(body), len(header))
            return b"".join((prefix, header, body)) if body else prefix + header
        return RemotingCommand.encode(self)
