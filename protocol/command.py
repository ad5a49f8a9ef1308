"""RemotingCommand and its three header codecs (JSON, ROCKETMQ binary, msgpack).

Mirrors remoting/protocol/RemotingCommand.java and RocketMQSerializable.java, RocketMQ 4.9.x.

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
import json
import json.encoder
import json.scanner
import logging
import os
import re
import secrets
import struct
from dataclasses import dataclass
from typing import Any, Final

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

log = logging.getLogger(__name__)

__all__ = ["RemotingCommand", "ResponseTemplate", "next_opaque", "request_parts"]

_PREFIX = struct.Struct(">ii")  # total_length, header_meta
_META = struct.Struct(">i")  # header_meta alone (decode sees the frame after total_length)
_BIN_FIXED = struct.Struct(
    ">h"  # code
    "B"  # language
    "h"  # version
    "i"  # opaque
    "i"  # flag
    "i"  # remark_len
)
_BIN_FIXED_SIZE: Final = _BIN_FIXED.size  # 17
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_MSGPACK_INTS = struct.Struct(">iBiii")  # code, language, version, opaque, flag: validation only
BIN_MIN_HEADER_SIZE: Final = _BIN_FIXED_SIZE + _I32.size  # 21

HEADER_LENGTH_MASK: Final = 0xFFFFFF
# Plain ints for dispatch on the hot path (comparing with IntEnum members costs more).
_JSON: Final = int(SerializeType.JSON)
_ROCKETMQ: Final = int(SerializeType.ROCKETMQ)
_MSGPACK: Final = int(SerializeType.MSGPACK)
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1

_LANG_BY_NAME: Final[dict[str, int]] = {m.name: m.value for m in LanguageCode}
_LANG_JSON: Final[dict[int, str]] = {m.value: f'"{m.name}"' for m in LanguageCode}

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


def _not_json(obj: object) -> Any:
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} not allowed")


_json_encode = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
).encode
_json_string = json.encoder.encode_basestring  # the C version when available
_json_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_json_decode = _json_decoder.decode
# The scanner json.loads runs, called directly (one object at index 0, no whitespace skipping).
_json_scan = json.scanner.make_scanner(_json_decoder)  # type: ignore[arg-type]  # stub is off
# A cached C encoder for extFields (JSONEncoder.encode builds one per call).
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_json_ext_chunks = (
    _c_make_encoder(None, _not_json, _json_string, None, ":", ",", True, False, True)
    if _c_make_encoder is not None
    else None
)
_msgpack_packb = msgpack.Packer(use_bin_type=True, autoreset=True).pack
_msgpack_unpackb = msgpack.unpackb


def _coerce_value(value: object) -> str | None:
    """One extFields value as Java would see it: a string, or None for JSON null."""
    if type(value) is str:
        return value
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return str(int(value)) if value.is_integer() else repr(value)
    # Objects or arrays: keep their compact JSON text (fastjson would do the same).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _coerce_ext(raw: object) -> dict[str, str] | None:
    """Validate a decoded JSON extFields member; coerce non-string values."""
    if raw is None:
        return None
    if type(raw) is not dict:
        raise BadHeaderError("extFields is not an object")
    for v in raw.values():
        if type(v) is not str:
            break
    else:
        return raw  # fast path: all strings already
    out: dict[str, str] = {}
    for k, v in raw.items():
        s = _coerce_value(v)
        if s is not None:
            out[k] = s
    return out


def _int_field(obj: dict[str, Any], key: str, default: int) -> int:
    """An int32 member of a decoded JSON header (absent => default)."""
    v = obj.get(key, default)
    if type(v) is not int:
        if v is None:
            return default
        raise BadHeaderError(f"header field {key} is not an integer: {v!r}")
    if not _INT32_MIN <= v <= _INT32_MAX:
        raise BadHeaderError(f"header field {key} out of int range: {v}")
    return v


def _language_from_json(v: object) -> int:
    """JSON `language`: an enum name or an ordinal; unknown names read as OTHER."""
    if type(v) is str:
        code = _LANG_BY_NAME.get(v)
        if code is None:
            log.debug("unknown language name=%s, reading it as OTHER", v)
            return LanguageCode.OTHER
        return code
    if type(v) is int and 0 <= v <= 0xFF:
        return v
    if v is None:
        return LanguageCode.JAVA
    raise BadHeaderError(f"header field language is invalid: {v!r}")


def _decode_json(header: memoryview | bytes) -> tuple[int, int, int, int, int, Any, Any]:
    try:
        text = str(header, "utf-8")
        try:
            obj, end = _json_scan(text, 0)  # C scanner, no wrapper frames
        except StopIteration:  # e.g. leading whitespace: the full decoder decides
            end = -1
        if end != len(text):
            obj = _json_decode(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadHeaderError(f"bad JSON header: {exc}") from None
    if type(obj) is not dict:
        raise BadHeaderError("JSON header is not an object")
    get = obj.get
    code = get("code", 0)
    version = get("version", 0)
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    if not (
        type(code) is int
        and type(version) is int
        and type(opaque) is int
        and type(flag) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
    ):
        code = _int_field(obj, "code", 0)
        version = _int_field(obj, "version", 0)
        opaque = _int_field(obj, "opaque", 0)
        flag = _int_field(obj, "flag", 0)
    lang = get("language")
    language = _LANG_BY_NAME.get(lang) if type(lang) is str else None
    if language is None:
        language = _language_from_json(lang)
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise BadHeaderError("header field remark is not a string")
    return code, language, version, opaque, flag, remark or None, _coerce_ext(get("extFields"))


def _decode_binary(header: memoryview) -> tuple[int, int, int, int, int, Any, Any]:
    # One copy of the (small) header to bytes: unpack_from and slice+decode on bytes measured
    # about 2x faster than on a memoryview here (no view object per field).
    hb = bytes(header)
    hlen = len(hb)
    if hlen < BIN_MIN_HEADER_SIZE:
        raise BadHeaderError(f"truncated binary header: {hlen} bytes")
    code, language, version, opaque, flag, rlen = _BIN_FIXED.unpack_from(hb, 0)
    pos = _BIN_FIXED_SIZE
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


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
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
            _BIN_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, len(remark)),
            remark,
            _I32.pack(len(ext_block)),
            ext_block,
        )
    )


def _json_ext(ext: dict[str, str]) -> str:
    """extFields as compact JSON with sorted keys (the cached C encoder when there is one)."""
    if _json_ext_chunks is None:
        return _json_encode(ext)
    return "".join(_json_ext_chunks(ext, 0))


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    # Members in fastjson's (alphabetical) order, assembled by hand: only extFields and
    # remark need the JSON encoder. The :d spec keeps IntEnum members numeric.
    ext = cmd.ext_fields
    if ext is not None:
        ext_part = '"extFields":' + _json_ext(ext) + ","
    elif cmd.flag & RPC_TYPE_RESPONSE:
        ext_part = '"extFields":{},'  # Java's processSendResponse dereferences it
    else:
        ext_part = ""
    lang = _LANG_JSON.get(cmd.language)
    if lang is None:
        lang = f"{cmd.language:d}"
    remark_part = '"remark":' + _json_string(cmd.remark) + "," if cmd.remark else ""
    return (
        f'{{"code":{cmd.code:d},{ext_part}"flag":{cmd.flag:d},"language":{lang},'
        f'"opaque":{cmd.opaque:d},{remark_part}"serializeTypeCurrentRPC":"JSON",'
        f'"version":{cmd.version:d}}}'
    ).encode()


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
                return _encode_json_header(self)
            if st == _ROCKETMQ:
                return _encode_binary_header(self)
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
        st = (meta >> 24) & 0xFF
        hlen = meta & HEADER_LENGTH_MASK
        end = 4 + hlen
        if end > flen:
            raise BadHeaderLengthError(f"header length {hlen} exceeds frame of {flen} bytes")
        header = mv[4:end]
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
            return cls(code, language, version, opaque, flag, remark or None, ext,
                       mv[end:] if end < flen else b"", st)  # fmt: skip
        if st == _JSON:
            fields = _decode_json(header)
        elif st == _ROCKETMQ:
            fields = _decode_binary(header)
        else:
            raise UnknownSerializeTypeError(f"unknown serialize type {st}")
        code, language, version, opaque, flag, remark, ext = fields
        return cls(
            code,
            language,
            version,
            opaque,
            flag,
            remark,
            ext,
            mv[end:] if end < flen else b"",
            st,
        )


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
            _c, _l, _v, opaque, flag, _r = _BIN_FIXED.unpack_from(frame, 4)
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
            _c, _l, _v, opaque, flag, _r, _e = _decode_json(frame[4:end])
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
            c, _, _, opaque, flag, _, ext = _decode_json(frame[4:end])
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

    __slots__ = ("const", "fmt", "fmt_plain", "nkeys", "remark", "variable")

    def __init__(self, const: dict[str, str], variable: tuple[str, ...],
                 remark: str | None = None) -> None:  # fmt: skip
        self.variable = variable
        self.const = tuple(const.items())
        self.nkeys = len(const) + len(variable)
        self.remark = remark
        remark_part = ""  # the generic encoder writes no member for an empty remark either
        if remark:
            remark_part = ('"remark":' + _json_string(remark)).replace("{", "{{").replace(
                "}", "}}") + ","  # fmt: skip

        def lit(text: str) -> str:
            return _json_string(text).replace("{", "{{").replace("}", "}}")

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
        self.fmt_plain = render('"{%d}"')  # values known to need no escaping go in as they are

    def header(self, opaque: int, ext: dict[str, str]) -> bytes:
        """The JSON header for these ext values (each variable one JSON-quoted)."""
        quote = _json_string
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
        quote = _json_string
        header = self.fmt.format(*[quote(v) for v in values], opaque).encode()
        return _PREFIX.pack(4 + len(header), len(header)) + header

    def frame_plain(self, serialize_type: int, opaque: int, values: tuple[str, ...]) -> bytes:
        """frame() for values made only of characters JSON writes as they are (digits, hex,
        '-'): no escaping pass."""
        if serialize_type != _JSON:
            return self.frame(serialize_type, opaque, values)
        header = self.fmt_plain.format(*values, opaque).encode()
        return _PREFIX.pack(4 + len(header), len(header)) + header


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
