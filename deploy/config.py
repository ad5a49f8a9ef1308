"""broker.conf reading: Java properties files with RocketMQ's property names.

Mirrors common/MixAll.java file2String + properties2Object as used by BrokerStartup, RocketMQ
4.9.x: `key=value` or `key:value` lines, `#`/`!` comments, trailing-backslash continuations.
"""

from __future__ import annotations

import logging
import os

from store.config import parse_properties_text as parse_properties

log = logging.getLogger(__name__)

__all__ = ["ConfigError", "load_properties", "parse_properties", "resolve_paths"]

# The names that hold paths (MessageStoreConfig, NamesrvConfig; brokerConfigPath is ours)
BROKER_PATH_KEYS = ("storePathRootDir", "storePathCommitLog", "brokerConfigPath")
NAMESRV_PATH_KEYS = ("kvConfigPath", "configStorePath", "rocketmqHome")


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


def resolve_paths(props: dict[str, str], keys: tuple[str, ...]) -> dict[str, str]:
    """`props` with the non-empty values of `keys` made absolute: `~` expanded, a relative path
    taken from the working directory (where the user started the command, as a RocketMQ
    server started there reads it); every actor process then sees the same path."""
    out = dict(props)
    for key in keys:
        value = (out.get(key) or "").strip()
        if value:
            out[key] = os.path.abspath(os.path.expanduser(value))
    return out
