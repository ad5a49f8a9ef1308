"""Actor processes write their log records straight to the log file, never through Thespian.

Mirrors nothing in RocketMQ (its logback appenders write from the broker's one JVM). Thespian
replaces `logging.root` in every actor process (and in its admin) with a ThespianLogForwarder
whose handler sends each record as a message to Thespian's logger process. That put a
transport message on the path of anything an actor logs: a debug record per closed client
connection once filled the RemotingServer's transmit queue (950 pending), the transport broke
and the actor died (issue #12). Here, in the launching process and before the actor system
forks its admin (every actor is forked from that admin and inherits what it has):

- the forwarding handler's `handle` is replaced by one that appends the record to the log file
  from the process that made it, and the forwarding loggers get the configured level, so a
  record below it is not even built;
- loggers made in the launcher before the fork (a module it had imported) hang under its own
  root logger, not under Thespian's: in the forked admin (and so in every actor) that root's
  handlers are replaced by the same direct append (`os.register_at_fork`, armed only while
  `directly()` forks the admin: other forks of the launcher are left alone).

Every process opens the file itself in append mode (O_APPEND: each record is one write, so
whole records from several processes do not interleave).

A peer can make a broker log a warning per request (an unknown code, a body that does not
parse, a bad heartbeat), and the file, unlike logback's rolling appender, does not roll: each
process writes at most BURST warnings (or errors) of one logger and message template per
WINDOW_S, and the next one of that template after a window says how many were left out; other
levels are all written.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s"

_state: dict[str, Any] = {"path": "", "level": logging.INFO, "armed": False, "patched": False}
_handler: dict[int, logging.Handler] = {}  # pid -> this process's file handler


def _file_handler() -> logging.Handler | None:
    """This process's handler on the log file (made on first use after a fork)."""
    pid = os.getpid()
    handler = _handler.get(pid)
    if handler is None and _state["path"]:
        handler = logging.FileHandler(_state["path"], mode="a", encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter(FORMAT))
        _handler.clear()  # a parent's handler (inherited through fork) is never used here
        _handler[pid] = handler
    return handler


BURST = 20  # records of one logger and message template written per window
WINDOW_S = 10.0
MAX_TEMPLATES = 4096  # windows kept; more templates than that (never seen) starts afresh


class RecordThrottle:
    """Which records of a flood get written: at most `burst` per key in each window of
    `window_s` seconds (a window starts at its first record). Pure: time is passed in."""

    __slots__ = ("burst", "window_s", "windows")

    def __init__(self, burst: int = BURST, window_s: float = WINDOW_S) -> None:
        self.burst = burst
        self.window_s = window_s
        self.windows: dict[tuple[str, str], list[float]] = {}  # key -> [start, written, left out]

    def admit(self, key: tuple[str, str], now: float) -> tuple[bool, int]:
        """(write this record?, how many of this key the previous window left out: say so)."""
        w = self.windows.get(key)
        if w is None or now - w[0] >= self.window_s:
            if w is None and len(self.windows) >= MAX_TEMPLATES:
                self.windows.clear()
            self.windows[key] = [now, 1, 0]
            return True, 0 if w is None else int(w[2])
        if w[1] < self.burst:
            w[1] += 1
            return True, 0
        w[2] += 1
        return False, 0


_throttle: dict[int, RecordThrottle] = {}  # pid -> this process's (a fork starts afresh)


def _admitted(record: logging.LogRecord) -> tuple[bool, int]:
    if not logging.WARNING <= record.levelno < logging.CRITICAL:
        return True, 0  # what a peer's bad input makes is warnings (and errors)
    pid = os.getpid()
    throttle = _throttle.get(pid)
    if throttle is None:
        _throttle.clear()
        throttle = _throttle[pid] = RecordThrottle()
    return throttle.admit((record.name, str(record.msg)), time.monotonic())


def _append(handler: logging.Handler, record: logging.LogRecord) -> None:
    """The record into the file, unless its template is flooding (RecordThrottle). A file
    that cannot be opened (its directory deleted, a full disk) loses the record, never the
    process that logs it: logging.FileHandler opens a delayed file outside its own error
    handling, so the OSError would reach the actor that logged (a client instance forked
    after an earlier in-process cluster's log directory was removed died of its first log
    line)."""
    write, left_out = _admitted(record)
    try:
        if left_out:
            handler.handle(logging.makeLogRecord({
                "name": record.name, "levelno": record.levelno,
                "levelname": record.levelname,
                "msg": "%d more records like this were left out in %.0f s: %s",
                "args": (left_out, WINDOW_S, str(record.msg)),
            }))  # fmt: skip
        if write:
            handler.handle(record)
    except OSError:
        pass


class DirectHandler(logging.Handler):
    """Appends records to the log file from the process that logs them."""

    def emit(self, record: logging.LogRecord) -> None:
        handler = _file_handler()
        if handler is not None and record.levelno >= _state["level"]:
            _append(handler, record)


def _direct_handle(self: Any, record: logging.LogRecord) -> bool:
    """ThespianLogForwardHandler.handle: append to the file instead of sending a message."""
    if record.levelno < _state["level"]:
        return False
    handler = _file_handler()
    if handler is not None:
        _append(handler, record)
    return True


def _after_fork_in_child() -> None:
    """In a process forked while armed: the launcher's root logger writes directly too."""
    if not _state["armed"]:
        return
    from thespian.system.logdirector import ThespianLogForwarder

    root = logging.root
    if isinstance(root, ThespianLogForwarder):
        return  # an actor forked from the admin: its loggers' old root was handled there
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(DirectHandler())
    root.setLevel(_state["level"])


def _patch() -> None:
    if _state["patched"]:
        return
    _state["patched"] = True
    from thespian.system.logdirector import ThespianLogForwarder, ThespianLogForwardHandler

    original_init = ThespianLogForwarder.__init__

    def forwarder_init(self: Any, to_addr: Any, transport: Any, logLevel: int = 0) -> None:
        original_init(self, to_addr, transport, logLevel=max(int(logLevel), _state["level"]))

    ThespianLogForwardHandler.handle = _direct_handle  # type: ignore[method-assign]
    ThespianLogForwarder.__init__ = forwarder_init  # type: ignore[method-assign]
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def directly(path: str, level: str | int = "INFO") -> Iterator[None]:
    """Within this block, start the actor system: its admin and every actor append their
    records at `level` or above to `path` themselves."""
    lvl = logging.getLevelName(level) if isinstance(level, str) else level
    for handler in _handler.values():
        handler.close()
    _handler.clear()
    _state["path"], _state["level"] = path, int(lvl)
    _patch()
    _state["armed"] = True
    try:
        yield
    finally:
        _state["armed"] = False
