"""broker.conf reading: Java properties files with RocketMQ's property names.

Mirrors common/MixAll.java file2String + properties2Object as used by BrokerStartup, RocketMQ
4.9.x: `key=value` or `key:value` lines, `#`/`!` comments, trailing-backslash continuations.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from store.config import parse_properties_text as parse_properties

if TYPE_CHECKING:
    from protocol.acl import SessionCredentials

log = logging.getLogger(__name__)

__all__ = [
    "ACCESS_KEY_ENV",
    "SECRET_KEY_ENV",
    "ConfigError",
    "credentials_from_env",
    "load_properties",
    "parse_properties",
    "resolve_paths",
]

ACCESS_KEY_ENV = "ACTORMQ_ACCESS_KEY"  # ACL keys of the CLI and the SparkBridge (mqadmin's
SECRET_KEY_ENV = "ACTORMQ_SECRET_KEY"  # are in conf/tools.yml)

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


def credentials_from_env() -> SessionCredentials | None:
    """The ACL keys in ACTORMQ_ACCESS_KEY / ACTORMQ_SECRET_KEY (None when unset); ConfigError
    for one without the other."""
    from protocol.acl import SessionCredentials

    access, secret = os.environ.get(ACCESS_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
    if (access is None) != (secret is None):
        raise ConfigError(f"set both {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or neither")
    return SessionCredentials.of(access, secret)


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
