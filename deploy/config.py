"""broker.conf reading: Java properties files with RocketMQ's property names.

Mirrors common/MixAll.java file2String + properties2Object as used by BrokerStartup, RocketMQ
4.9.x: `key=value` or `key:value` lines, `#`/`!` comments, trailing-backslash continuations.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """The configuration cannot be used (missing file, bad value)."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text into a dict (later keys win)."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if pending:
            line = pending + line
            pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = len(line)
        for i, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                cut = i
                break
        key = line[:cut].strip()
        value = line[cut:].lstrip()
        if value[:1] in ("=", ":"):
            value = value[1:].lstrip()
        if key:
            props[key] = value
    return props


def load_properties(path: str) -> dict[str, str]:
    """Read and parse a properties file; ConfigError when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text: {exc}") from None
