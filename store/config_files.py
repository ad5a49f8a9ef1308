"""Atomic JSON config files with a `.bak` copy.

Mirrors common/MixAll.java string2File / file2String and common/ConfigManager.java load
(falling back to `<file>.bak`), RocketMQ 4.9.x. Writes go to `<file>.tmp`, are fsynced, the
current file is kept as `<file>.bak`, and the tmp file is renamed into place; the directory is
fsynced so the rename survives a crash. BackgroundWriter does the same on a thread, for a
caller that serves requests meanwhile (three fsyncs can wait behind the disk's writeback for
hundreds of milliseconds).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import threading

log = logging.getLogger(__name__)


def _fsync_dir(path: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: str, text: str) -> None:
    """Write text to path atomically, keeping the previous content as path.bak. On an OSError
    (a full disk) the temporary files are removed again and the file is as it was."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    bak_tmp = path + ".bak.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(path):
            shutil.copyfile(path, bak_tmp)
            with open(bak_tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(bak_tmp, path + ".bak")
        os.replace(tmp, path)
    except OSError:
        for left in (tmp, bak_tmp):
            with contextlib.suppress(OSError):
                os.unlink(left)
        raise
    _fsync_dir(path)


class PersistFailures:
    """Which files could not be written, so that a failing write is logged once per file and
    its recovery once (ConfigManager.persist logs every failed round; on a full disk that was a
    traceback every few seconds per file). Not thread-safe: one per writer."""

    def __init__(self) -> None:
        self.failing: dict[str, str] = {}  # path -> the error of its last failed write

    def write(self, path: str, text: str) -> bool:
        """write_text_atomic; False (logged once until it works again) on an OSError."""
        try:
            write_text_atomic(path, text)
        except OSError as exc:
            if path not in self.failing:
                log.error("writing %s failed (%s): written again later", path, exc)
            self.failing[path] = str(exc)
            return False
        if self.failing.pop(path, None) is not None:
            log.info("writing %s works again", path)
        return True


class BackgroundWriter:
    """write_text_atomic on a daemon thread; of the texts submitted for one path while a write
    is going on, only the latest is written next. A text whose write failed is written again
    (ConfigManager.persist rewrites its file every period): after retry_s, at the next submit,
    and at close(), unless a newer text for that path came meanwhile."""

    def __init__(self, name: str = "config-writer", retry_s: float = 10.0) -> None:
        self._pending: dict[str, str] = {}
        self._failed: dict[str, str] = {}  # path -> the text whose write failed last
        self._cv = threading.Condition()
        self._busy = False
        self._stop = False
        self.retry_s = retry_s
        self.writes = 0
        self.failures = 0
        self._persist = PersistFailures()  # (only the writer thread uses it)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, path: str, text: str) -> None:
        """Queue text for path (replacing what is queued for it and not yet being written);
        texts that failed before are queued again too."""
        with self._cv:
            self._failed.pop(path, None)
            self._requeue_failed()
            self._pending[path] = text
            self._cv.notify()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything submitted so far was tried; False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._pending and not self._busy, timeout_s)

    def close(self) -> None:
        """Write what is queued (and try a failed text once more), then stop the thread."""
        with self._cv:
            self._requeue_failed()
            self._cv.notify_all()
        self.flush()
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout=30)

    def _requeue_failed(self) -> None:
        """(Under the lock.) Move failed texts back into the queue."""
        for path, text in self._failed.items():
            self._pending.setdefault(path, text)
        self._failed.clear()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._stop:
                    if not self._failed:
                        self._cv.wait()
                    elif not self._cv.wait(self.retry_s):
                        self._requeue_failed()
                if not self._pending:
                    return
                path, text = self._pending.popitem()
                self._busy = True
            ok = False
            try:
                ok = self._persist.write(path, text)
            finally:
                with self._cv:
                    if ok:
                        self.writes += 1
                    else:
                        self.failures += 1
                        if path not in self._pending:
                            self._failed[path] = text
                    self._busy = False
                    self._cv.notify_all()


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
