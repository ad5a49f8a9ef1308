"""The JSON header codec of RemotingCommand (serialize type 0).

Mirrors remoting/protocol/RemotingSerializable.java and RemotingCommand.java's JSON header
(buildHeader / headerDecode), RocketMQ 4.9.x: fastjson's compact text, keys alphabetical, nulls
omitted; decoding is lenient about what real clients put in extFields.
"""

from __future__ import annotations

import json
import json.encoder
import json.scanner
import logging
import math
import re
from typing import Any, Final

import msgpack

from protocol.codes import (
    RPC_TYPE_RESPONSE,
    LanguageCode,
)
from protocol.errors import (
    BadHeaderError,
)
from protocol.header_fields import HeaderFields
from protocol.java_number import parse_java_int

log = logging.getLogger(__name__)


_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1

_TRAILING_ZEROS: Final = re.compile(r"\.0*$")  # fastjson's NUMBER_WITH_TRAILING_ZEROS_PATTERN
_LANG_BY_NAME: Final[dict[str, int]] = {m.name: m.value for m in LanguageCode}
_LANG_JSON: Final[dict[int, str]] = {m.value: f'"{m.name}"' for m in LanguageCode}


def _not_json(obj: object) -> Any:
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} not allowed")


_json_encode = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
).encode
json_string = json.encoder.encode_basestring  # the C version when available
_json_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_json_decode = _json_decoder.decode
# The scanner json.loads runs, called directly (one object at index 0, no whitespace skipping).
_json_scan = json.scanner.make_scanner(_json_decoder)  # type: ignore[arg-type]  # stub is off
# A cached C encoder for extFields (JSONEncoder.encode builds one per call).
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_json_ext_chunks = (
    _c_make_encoder(None, _not_json, json_string, None, ":", ",", True, False, True)
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


def fastjson_int(v: object, default: int) -> int | None:
    """A JSON header's int member as fastjson sets RemotingCommand's int field: absent (pass
    `default`) or null => default; a number with a fraction truncated (105.9 => 105); a
    boolean 1 or 0; text as TypeUtils.castToInt reads it ("", "null" => default; commas
    dropped, a trailing ".000" dropped, then Integer.parseInt). None: not an int32."""
    n: int | None
    if isinstance(v, bool):  # before int: a bool is one
        n = int(v)
    elif isinstance(v, int):
        n = v
    elif v is None:
        return default
    elif isinstance(v, float):
        n = int(v) if math.isfinite(v) else None
    elif isinstance(v, str):
        text = v.replace(",", "") if v not in ("", "null", "NULL") else ""
        if not text:
            return default
        n = parse_java_int(_TRAILING_ZEROS.sub("", text), _INT32_MIN, _INT32_MAX)
    else:
        return None
    return n if n is not None and _INT32_MIN <= n <= _INT32_MAX else None


def _int_field(obj: dict[str, Any], key: str, default: int) -> int:
    """fastjson_int of a decoded JSON header's member; BadHeaderError when it is not one."""
    v = obj.get(key, default)
    n = fastjson_int(v, default)
    if n is None:
        raise BadHeaderError(f"header field {key} is not an int: {v!r:.100}")
    return n


def _remark(v: object) -> str | None:
    """The remark member as fastjson reads it into a String: text as it is, a number or a
    boolean as written, an object or array as its JSON text."""
    if v is None or type(v) is str:
        return v
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) in (int, float):
        return repr(v)
    return _json_encode(v)


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


def decode_json_header(header: memoryview | bytes) -> tuple[int, int, int, int, int, Any, Any]:
    try:
        text = str(header, "utf-8", "replace")  # new String(bytes, UTF-8), as Java reads it
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
        remark = _remark(remark)
    return code, language, version, opaque, flag, remark or None, _coerce_ext(get("extFields"))



def _json_ext(ext: dict[str, str]) -> str:
    """extFields as compact JSON with sorted keys (the cached C encoder when there is one)."""
    if _json_ext_chunks is None:
        return _json_encode(ext)
    return "".join(_json_ext_chunks(ext, 0))


def encode_json_header(cmd: HeaderFields) -> bytes:
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
    remark_part = '"remark":' + json_string(cmd.remark) + "," if cmd.remark else ""
    return (
        f'{{"code":{cmd.code:d},{ext_part}"flag":{cmd.flag:d},"language":{lang},'
        f'"opaque":{cmd.opaque:d},{remark_part}"serializeTypeCurrentRPC":"JSON",'
        f'"version":{cmd.version:d}}}'
    ).encode()
