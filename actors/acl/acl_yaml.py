"""plain_acl.yml read and written: the YAML that RocketMQ's ACL files are made of.

Mirrors AclUtils.getYamlDataObject / writeDataObject (snakeyaml), RocketMQ 4.9.x, for the
shapes those files have: nested block mappings and block sequences (of scalars, or of mappings
as the accounts are), flow sequences of scalars (`[a, b]`, `[]`), plain, 'single' and
"double" quoted scalars, comments and blank lines. Scalars stay strings (None for an empty
value, `~` or `null`): the reader of a field decides what it means (`admin: true`), as Java's
JSON conversion does (`secretKey: 12345678` is the string "12345678"). Anchors, tags,
multi-line scalars and flow mappings are not ACL shapes: they raise YamlError naming the line.
"""

from __future__ import annotations

import json
import re
from typing import Any

_KEY = re.compile(r"^([^\s#'\"][^:#]*?|'[^']*'|\"[^\"]*\")\s*:(?:\s+|$)(.*)$")


class YamlError(ValueError):
    """A file that is not the YAML an ACL file is made of."""


def _strip_comment(text: str) -> str:
    quote = ""
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    return text.rstrip()


def _scalar(raw: str, line: int) -> str | None:
    raw = raw.strip()
    if raw in ("", "~", "null", "Null", "NULL"):
        return None
    if raw[0] == "'":
        if len(raw) < 2 or raw[-1] != "'":
            raise YamlError(f"line {line}: unterminated quoted scalar")
        return raw[1:-1].replace("''", "'")
    if raw[0] == '"':
        try:
            value = json.loads(raw)
        except ValueError:
            raise YamlError(f"line {line}: bad double-quoted scalar") from None
        if not isinstance(value, str):
            raise YamlError(f"line {line}: bad double-quoted scalar")
        return value
    if raw[0] in "&*!|>{" or raw.startswith("%"):
        raise YamlError(f"line {line}: unsupported YAML ({raw[:20]!r})")
    return raw


def _flow_or_scalar(raw: str, line: int) -> Any:
    raw = raw.strip()
    if raw.startswith("["):
        if not raw.endswith("]"):
            raise YamlError(f"line {line}: unterminated flow sequence")
        inner = raw[1:-1].strip()
        return [_scalar(x, line) for x in inner.split(",")] if inner else []
    return _scalar(raw, line)


class _Lines:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[int, int, str]] = []  # (line number, indent, content)
        for no, raw in enumerate(text.splitlines(), 1):
            if "\t" in raw[: len(raw) - len(raw.lstrip())]:
                raise YamlError(f"line {no}: a tab in the indentation")
            content = _strip_comment(raw)
            if not content.strip() or content.strip() in ("---", "..."):
                continue
            self.items.append((no, len(content) - len(content.lstrip()), content.strip()))
        self.pos = 0

    def peek(self) -> tuple[int, int, str] | None:
        return self.items[self.pos] if self.pos < len(self.items) else None


def _block(lines: _Lines, indent: int) -> Any:
    first = lines.peek()
    if first is None or first[1] < indent:
        return None
    if first[2].startswith("- ") or first[2] == "-":
        return _sequence(lines, first[1])
    return _mapping(lines, first[1])


def _sequence(lines: _Lines, indent: int) -> list[Any]:
    out: list[Any] = []
    while (cur := lines.peek()) is not None and cur[1] == indent and \
            (cur[2].startswith("- ") or cur[2] == "-"):
        no, _, content = cur
        rest = content[1:].strip()
        lines.pos += 1
        if not rest:
            out.append(_block(lines, indent + 1))
        elif _KEY.match(rest):  # "- key: value": a mapping whose keys line up after "- "
            inner = indent + (len(content) - len(rest))
            lines.items[lines.pos - 1] = (no, inner, rest)
            lines.pos -= 1
            out.append(_mapping(lines, inner))
        else:
            out.append(_flow_or_scalar(rest, no))
    if (cur := lines.peek()) is not None and cur[1] > indent:
        raise YamlError(f"line {cur[0]}: unexpected indentation")
    return out


def _mapping(lines: _Lines, indent: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while (cur := lines.peek()) is not None and cur[1] == indent:
        no, _, content = cur
        m = _KEY.match(content)
        if m is None:
            raise YamlError(f"line {no}: expected 'key: value'")
        key = _scalar(m.group(1), no) or ""
        lines.pos += 1
        value = m.group(2)
        if value.strip():
            out[key] = _flow_or_scalar(value, no)
        else:
            nxt = lines.peek()
            if nxt is not None and (nxt[1] > indent or (nxt[1] == indent and
                                                        nxt[2].startswith("-"))):  # fmt: skip
                out[key] = _block(lines, nxt[1])
            else:
                out[key] = None
    if (cur := lines.peek()) is not None and cur[1] > indent:
        raise YamlError(f"line {cur[0]}: unexpected indentation")
    return out


def loads(text: str) -> dict[str, Any]:
    """The file's top-level mapping ({} for an empty file)."""
    lines = _Lines(text)
    if lines.peek() is None:
        return {}
    data = _block(lines, 0)
    if lines.peek() is not None:
        raise YamlError(f"line {lines.peek()[0]}: unexpected content")  # type: ignore[index]
    if not isinstance(data, dict):
        raise YamlError("the file is not a mapping")
    return data


def _emit_scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if text == "" or text != text.strip() or any(c in text for c in ":#'\"{}[],&*!|>%@`") \
            or text.lower() in ("null", "~", "true", "false", "yes", "no"):
        return "'" + text.replace("'", "''") + "'"
    return text


def dumps(data: dict[str, Any]) -> str:
    """The mapping as block YAML (what writeDataObject writes, in its shapes)."""
    out: list[str] = []

    def emit(value: Any, indent: int) -> None:
        pad = " " * indent
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, (dict, list)) and v:
                    out.append(f"{pad}{_emit_scalar(k)}:")
                    emit(v, indent + 2)
                elif isinstance(v, list):
                    out.append(f"{pad}{_emit_scalar(k)}: []")
                else:
                    out.append(f"{pad}{_emit_scalar(k)}: {_emit_scalar(v)}".rstrip())
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict) and item:
                    start = len(out)
                    emit(item, indent + 2)
                    out[start] = f"{pad}- " + out[start][indent + 2 :]
                else:
                    out.append(f"{pad}- {_emit_scalar(item)}".rstrip())

    emit(data, 0)
    return "\n".join(out) + "\n"
