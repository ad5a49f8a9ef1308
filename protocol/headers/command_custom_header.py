"""The custom header machinery: `@header` declares a typed extFields class.

Mirrors remoting/CommandCustomHeader.java and RemotingCommand.makeCustomHeaderToNet /
decodeCommandCustomHeader, RocketMQ 4.9.x; the header classes themselves are in the sibling
modules of protocol.headers.

Each header is a slotted dataclass declared with `@header`. Python attributes are snake_case;
the wire key is the camelCase form unless the class lists an exception in `_KEYS`. Annotation
names pick the parser (as Java's declared field type does):

    str   -> the string as sent        int  -> Integer.parseInt (32-bit, named error)
    Long  -> Long.parseLong (64-bit)   bool -> Boolean.parseBoolean, plus C++'s "1" as true

A field without a default is required (`@CFNotNull`): missing, it raises
HeaderFieldError(SYSTEM_ERROR, "the custom field <key> is null"). Optional fields default to
None (or to False for Java primitive booleans) and `to_ext()` omits None. `from_ext` and
`to_ext` are generated per class (like dataclasses generates __init__), because the send and
pull headers sit on the hot path. Unknown keys (C++'s AccessKey, Signature, ...) are ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import (
    Any,
    ClassVar,
    Final,
    NamedTuple,
    Self,
    TypeVar,
    cast,
    dataclass_transform,
)

from protocol.codes import ResponseCode
from protocol.errors import HeaderFieldError
from protocol.java_number import parse_java_int

log = logging.getLogger(__name__)

Long = int  # Java long / Long: a 64-bit field (the builder reads the annotation name)

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
_EMPTY: Final[Mapping[str, str]] = {}


class FieldSpec(NamedTuple):
    """One header field: attribute, wire key, kind (str/int/Long/bool), required, default."""

    attr: str
    key: str
    kind: str
    required: bool
    default: Any


def _missing(key: str) -> HeaderFieldError:
    return HeaderFieldError(ResponseCode.SYSTEM_ERROR, f"the custom field <{key}> is null")


def _bad_number(key: str, value: object, java_type: str) -> HeaderFieldError:
    return HeaderFieldError(
        ResponseCode.SYSTEM_ERROR,
        f"the custom field <{key}> is not a valid {java_type}: {value!r}",
    )


def _number(v: object, lo: int, hi: int) -> int | None:
    """A header field's number as decodeCommandCustomHeader reads it (text by Java's rules,
    protocol.java_number; an int as is), within [lo, hi]; None where Java throws."""
    if type(v) is str:
        return parse_java_int(v, lo, hi)
    if type(v) is int and lo <= v <= hi:
        return v
    return None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def field_specs(cls: type, keys: Mapping[str, str]) -> tuple[FieldSpec, ...]:
    out = []
    for f in fields(cls):
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        kind = ann.replace("| None", "").replace("None |", "").strip()
        if kind not in ("str", "int", "Long", "bool"):
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported header field type {ann}")
        required = f.default is MISSING and f.default_factory is MISSING
        out.append(FieldSpec(f.name, keys.get(f.name) or _camel(f.name), kind, required, f.default))
    return tuple(out)


def build_from_ext(cls: type, specs: tuple[FieldSpec, ...]) -> Callable[..., Any]:
    """Generate `from_ext(cls, ext)` for one key set (number parsing inlined: hot path)."""
    ns: dict[str, Any] = {"_bad_number": _bad_number, "_missing": _missing, "_EMPTY": _EMPTY,
                          "_number": _number}
    lines = ["def from_ext(cls, ext):", "    if ext is None: ext = _EMPTY", "    g = ext.get"]
    args = []
    for i, s in enumerate(specs):
        a = f"a{i}"
        args.append(a)
        lines.append(f"    {a} = g({s.key!r})")
        if s.required:
            lines.append(f"    if {a} is None: raise _missing({s.key!r})")
            ind = "    "
        else:
            ns[f"d{i}"] = s.default
            lines.append(f"    if {a} is None: {a} = d{i}")
            lines.append("    else:")
            ind = "        "
        if s.kind in ("int", "Long"):
            lo, hi = (INT32_MIN, INT32_MAX) if s.kind == "int" else (INT64_MIN, INT64_MAX)
            java = "int" if s.kind == "int" else "long"
            lines += [  # Integer.parseInt / Long.parseLong: no spaces, no underscores
                f"{ind}if type({a}) is str and {a}.isdecimal() and {a}.isascii(): {a} = int({a})",
                f"{ind}else: {a} = _number({a}, {lo}, {hi})",
                f"{ind}if {a} is None or not {lo} <= {a} <= {hi}:",
                f"{ind}    raise _bad_number({s.key!r}, g({s.key!r}), {java!r})",
            ]
        elif s.kind == "bool":
            # Java Boolean.parseBoolean ("true", any case), plus "1": the C++ clients send
            # "1"/"0" (a batch's "m": "1"), which 4.9.8 reads as false (tests/integration/
            # test_cpp_clients.py::test_cpp_batch_send needs it: its batches would be one
            # message each there)
            lines.append(f'{ind}{a} = {a} == "true" or {a} == "1" or {a}.lower() == "true"')
        elif not s.required:
            lines.append(f"{ind}pass")
    lines.append(f"    return cls({', '.join(args)})")
    exec("\n".join(lines), ns)  # code generated from our own field specs
    fn: Callable[..., Any] = ns["from_ext"]
    fn.__qualname__ = f"{cls.__name__}.from_ext"
    return fn


def build_to_ext(cls: type, specs: tuple[FieldSpec, ...]) -> Callable[..., dict[str, str]]:
    """Generate `to_ext(self)` for one key set: every non-None field as a string."""
    lines = ["def to_ext(self):", "    d = {}"]
    for s in specs:
        lines.append(f"    v = self.{s.attr}")
        if s.kind == "str":
            val = "v"
        elif s.kind == "bool":
            val = '"true" if v else "false"'
        else:
            val = "str(v)"
        lines.append(f"    if v is not None: d[{s.key!r}] = {val}")
    lines.append("    return d")
    ns: dict[str, Any] = {}
    exec("\n".join(lines), ns)  # code generated from our own field specs
    fn: Callable[..., dict[str, str]] = ns["to_ext"]
    fn.__qualname__ = f"{cls.__name__}.to_ext"
    return fn


class CommandCustomHeader:
    """Base of every header: generated `from_ext` / `to_ext`, field specs in `FIELDS`."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()
    _KEYS: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_ext(cls, ext: Mapping[str, str] | None) -> Self:
        """Parse extFields (raises HeaderFieldError on a missing/malformed field)."""
        raise NotImplementedError

    def to_ext(self) -> dict[str, str]:
        """extFields for this header: every non-None field, values as strings."""
        raise NotImplementedError


_H = TypeVar("_H", bound=type[CommandCustomHeader])


@dataclass_transform()
def header(cls: _H) -> _H:
    """Make `cls` a slotted dataclass and generate its from_ext / to_ext."""
    dc = dataclass(slots=True)(cls)
    specs = field_specs(dc, dc._KEYS)
    dc.FIELDS = specs
    dc.from_ext = classmethod(build_from_ext(dc, specs))  # type: ignore[assignment]
    dc.to_ext = build_to_ext(dc, specs)  # type: ignore[method-assign]
    return cast(_H, dc)
