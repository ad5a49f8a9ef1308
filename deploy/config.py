"""broker.conf reading: Java properties files with RocketMQ's property names.

Mirrors common/MixAll.java file2String + properties2Object as used by BrokerStartup, RocketMQ
4.9.x: `key=value` or `key:value` lines, `#`/`!` comments, trailing-backslash continuations.
"""

from __future__ import annotations

import logging

from store.config import parse_properties_text as parse_properties

log = logging.getLogger(__name__)

__all__ = ["ConfigError", "load_properties", "parse_properties"]


class ConfigError(Exception):
    """The configuration cannot be used (missing file, bad value)."""


def load_properties(path: str) -> dict[str, str]:
    """Read and parse a properties file; ConfigError when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text: {exc}") from None
