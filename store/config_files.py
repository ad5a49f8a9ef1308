"""Atomic JSON config files with a `.bak` copy.

Mirrors common/MixAll.java string2File / file2String and common/ConfigManager.java load
(falling back to `<file>.bak`), RocketMQ 4.9.x. Writes go to `<file>.tmp`, are fsynced, the
current file is kept as `<file>.bak`, and the tmp file is renamed into place; the directory is
fsynced so the rename survives a crash.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil

log = logging.getLogger(__name__)


def _fsync_dir(path: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: str, text: str) -> None:
    """Write text to path atomically, keeping the previous content as path.bak."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(path):
        bak = path + ".bak"
        bak_tmp = bak + ".tmp"
        shutil.copyfile(path, bak_tmp)
        with open(bak_tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(bak_tmp, bak)
    os.replace(tmp, path)
    _fsync_dir(path)


_UNQUOTED_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def _parses(text: str) -> bool:
    """True when text is JSON, allowing fastjson's unquoted integer map keys."""
    try:
        json.loads(text)
        return True
    except ValueError:
        pass
    try:
        json.loads(_UNQUOTED_KEY.sub(r'\1"\2"\3', text))
        return True
    except ValueError:
        return False


def _read_valid(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (FileNotFoundError, UnicodeDecodeError, OSError):
        return None
    if not text.strip():
        return None
    if not _parses(text):
        return None
    return text


def read_json_with_bak(path: str) -> str | None:
    """Content of path, or of path.bak when path is missing or unparsable; None if neither."""
    text = _read_valid(path)
    if text is not None:
        return text
    bak = _read_valid(path + ".bak")
    if bak is not None:
        log.warning("config file unreadable, using backup path=%s", path)
        return bak
    with contextlib.suppress(FileNotFoundError):
        if os.path.exists(path):
            log.warning("config file and backup unreadable path=%s", path)
    return None
