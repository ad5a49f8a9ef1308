"""The JSON codec of every body: a lenient reader, a compact writer and the body base class.

Mirrors remoting/protocol/RemotingSerializable.java (encode / decode / toJson, over fastjson)
as the bodies use it, RocketMQ 4.9.x; the body classes are in the sibling modules of
protocol.bodies.

Writing follows what a Java broker's fastjson writes, made standard: compact (no whitespace;
the Go client splits route text on "," and ":"), members in alphabetical order, null members
omitted, enums by name, ASCII-only (non-ASCII as \\uXXXX), numeric map keys quoted.

Reading is as lenient as fastjson: bare numeric map keys ({0:"a:1"}), enums as names or
ordinals, numbers and booleans as strings, missing members take the Java defaults, unknown
members are ignored. Anything that still does not fit raises BodyError (a ValueError).
"""

from __future__ import annotations

import enum
import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any, Self, TypeVar

log = logging.getLogger(__name__)


class BodyError(ValueError):
    """A body that is not JSON, or whose JSON does not have the expected shape."""


# --- lenient reader / compact writer ------------------------------------------------------------
# A JSON string token, or a bare key (number or identifier) right after "{" or "," and before ":".
# Strings are matched first and given back unchanged, so text inside strings is never touched.
_BARE_KEY = re.compile(
    r'"(?:[^"\\]|\\.)*"'
    r"|([{,]\s*)(-?\d+(?:\.\d+)?|[A-Za-z_$][\w$]*)(\s*:)",
    re.DOTALL,
)


def _quote_bare_key(m: re.Match[str]) -> str:
    if m.group(2) is None:
        return m.group(0)
    return f'{m.group(1)}"{m.group(2)}"{m.group(3)}'


def loads_lenient(text: str | bytes | bytearray | memoryview) -> object:
    """Parse JSON, also accepting fastjson's unquoted map keys; raises BodyError."""
    try:
        s = text if isinstance(text, str) else bytes(text).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"body is not UTF-8: {exc}") from exc
    try:
        return json.loads(s)
    except RecursionError as exc:
        raise BodyError("body nests too deeply") from exc
    except ValueError as first:  # JSONDecodeError, or an over-long integer literal
        try:
            return json.loads(_BARE_KEY.sub(_quote_bare_key, s))
        except RecursionError as exc:
            raise BodyError("body nests too deeply") from exc
        except ValueError:
            raise BodyError(f"body is not JSON: {first}") from first


def dumps_compact(obj: object) -> bytes:
    """Compact, key-sorted, ASCII-safe JSON bytes."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=True).encode()


def dumps_object_map(pairs: Iterable[tuple[object, object]]) -> bytes:
    """A map whose keys are objects, as fastjson writes Map<MessageQueue, V> ({{..}:v,...}).

    Not standard JSON: fastjson (every Java reader) parses it back; loads_object_map does too.
    """
    items = (dumps_compact(k) + b":" + dumps_compact(v) for k, v in pairs)
    return b"{" + b",".join(items) + b"}"


def loads_object_map(text: str, pos: int = 0) -> tuple[list[tuple[Any, Any]], int]:
    """Parse a map (object keys allowed) starting at text[pos] == "{": (pairs, end index)."""
    dec = json.JSONDecoder()
    ws = " \t\r\n"
    i = pos
    if text[i : i + 1] != "{":
        raise BodyError(f"map expected at {pos}")
    i += 1
    pairs: list[tuple[Any, Any]] = []
    try:
        while True:
            while text[i] in ws:
                i += 1
            if text[i] == "}":
                return pairs, i + 1
            key, i = dec.raw_decode(text, i)
            while text[i] in ws:
                i += 1
            if text[i] != ":":
                raise BodyError(f"':' expected at {i}")
            i += 1
            while text[i] in ws:
                i += 1
            value, i = dec.raw_decode(text, i)
            pairs.append((key, value))
            while text[i] in ws:
                i += 1
            if text[i] == ",":
                i += 1
            elif text[i] != "}":
                raise BodyError(f"',' or '}}' expected at {i}")
    except (IndexError, ValueError) as exc:
        if isinstance(exc, BodyError):
            raise
        raise BodyError(f"bad object-keyed map: {exc}") from exc


def dumps_pretty(obj: object) -> bytes:
    """Tab-indented, key-sorted JSON (the config-file form; fastjson reads it back)."""
    return json.dumps(
        obj, indent="\t", separators=(",", ":"), sort_keys=True, ensure_ascii=True
    ).encode()


# --- coercion -----------------------------------------------------------------------------------
E = TypeVar("E", bound=enum.IntEnum)
T = TypeVar("T")


def to_int(v: object, where: str) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            try:
                f = float(v)
            except ValueError:
                pass
            else:
                if f.is_integer():
                    return int(f)
    raise BodyError(f"{where}: expected an integer, got {v!r:.60}")


def to_str(v: object, where: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    raise BodyError(f"{where}: expected a string, got {type(v).__name__}")


def to_bool(v: object, where: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "1", "0"):
        return v.strip().lower() in ("true", "1")
    raise BodyError(f"{where}: expected a boolean, got {v!r:.60}")


def to_enum(v: object, cls: type[E], where: str) -> E:
    if isinstance(v, str):
        name = v.strip()
        if name in cls.__members__:
            return cls[name]
        try:
            v = int(name)
        except ValueError:
            pass
    if isinstance(v, int) and not isinstance(v, bool):
        try:
            return cls(v)
        except ValueError:
            pass
    raise BodyError(f"{where}: not a {cls.__name__} name or ordinal: {v!r:.60}")


class JsonObj:
    """Typed, lenient access to one decoded JSON object."""

    __slots__ = ("d", "where")

    def __init__(self, d: object, where: str) -> None:
        if not isinstance(d, dict):
            raise BodyError(f"{where}: expected an object, got {type(d).__name__}")
        self.d: dict[str, Any] = d
        self.where = where

    def _w(self, key: str) -> str:
        return f"{self.where}.{key}"

    def string(self, key: str, default: str = "") -> str:
        v = self.d.get(key)
        return default if v is None else to_str(v, self._w(key))

    def opt_str(self, key: str) -> str | None:
        v = self.d.get(key)
        return None if v is None else to_str(v, self._w(key))

    def integer(self, key: str, default: int = 0) -> int:
        v = self.d.get(key)
        return default if v is None else to_int(v, self._w(key))

    def boolean(self, key: str, default: bool = False) -> bool:
        v = self.d.get(key)
        return default if v is None else to_bool(v, self._w(key))

    def choice(self, key: str, cls: type[E], default: E) -> E:
        v = self.d.get(key)
        return default if v is None else to_enum(v, cls, self._w(key))

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None

    def array(self, key: str) -> list[Any]:
        v = self.d.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise BodyError(f"{self._w(key)}: expected an array")
        return v

    def mapping(self, key: str) -> dict[str, Any]:
        v = self.d.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise BodyError(f"{self._w(key)}: expected an object")
        return v

    def str_list(self, key: str) -> list[str]:
        w = self._w(key)
        return [to_str(x, w) for x in self.array(key) if x is not None]

    def int_list(self, key: str) -> list[int]:
        w = self._w(key)
        return [to_int(x, w) for x in self.array(key) if x is not None]

    def objs(self, key: str, make: Callable[[object, str], T]) -> list[T]:
        w = self._w(key)
        return [make(x, w) for x in self.array(key) if x is not None]


class JsonBody:
    """to_json/from_json on top of to_obj/from_obj."""

    __slots__ = ()

    def to_obj(self) -> dict[str, Any]:
        """This body as plain JSON-ready Python values."""
        raise NotImplementedError

    @classmethod
    def from_obj(cls, obj: object, where: str = "") -> Self:
        """Build from a decoded JSON value; raises BodyError."""
        raise NotImplementedError

    def to_json(self) -> bytes:
        """Compact JSON bytes as described in the json_body module docstring."""
        return dumps_compact(self.to_obj())

    @classmethod
    def from_json(cls, data: str | bytes | bytearray | memoryview) -> Self:
        """Parse leniently; raises BodyError (a ValueError)."""
        return cls.from_obj(loads_lenient(data), cls.__name__)


def drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def int_keyed(m: dict[str, Any], where: str) -> Iterable[tuple[int, Any]]:
    for k, v in m.items():
        yield to_int(k, f"{where} key"), v
