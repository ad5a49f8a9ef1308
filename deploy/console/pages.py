"""What the console's page modules share: the Console of the running app, reading the cluster
with the error kept for the page, and actions answered by a flashed message and a redirect.

Mirrors nothing in RocketMQ (rocketmq-dashboard's controllers share Spring's plumbing).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from flask import current_app, flash, redirect
from werkzeug.wrappers import Response

from deploy.admin_ext import AdminError
from deploy.console.history import ClusterSampler, MetricsHistory
from deploy.console.topic_service import ConsoleInputError

__all__ = ["Console", "ConsoleInputError", "act", "console", "local_input", "parse_ms", "read",
           "when"]

T = TypeVar("T")


@dataclass
class Console:
    """What every page of one console shares (kept in app.extensions["actormq"])."""

    namesrv: str
    history: MetricsHistory
    csrf_token: str
    sampler: ClusterSampler | None = None

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()


def console() -> Console:
    c: Console = current_app.extensions["actormq"]
    return c


def read(fn: Callable[[], T], what: str) -> tuple[T | None, str]:
    """(fn(), "") or (None, the error as the page says it)."""
    try:
        return fn(), ""
    except (AdminError, ValueError) as exc:
        return None, f"{what}: {exc}"


def act(fn: Callable[[], str], failed: str, then: str) -> Response:
    """Run an action: its message (or the error) flashed, then a redirect to `then`."""
    try:
        flash(fn(), "ok")
    except (AdminError, ValueError) as exc:  # ConsoleInputError among them
        flash(f"{failed}: {exc}", "error")
    return redirect(then, 303)


def parse_ms(text: str, what: str) -> int:
    """A time typed in a form: ms since the epoch, or the browser's yyyy-mm-ddThh:mm[:ss]
    (local time of the console's host)."""
    text = text.strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            return int(time.mktime(time.strptime(text, fmt)) * 1000)
        except ValueError:
            continue
    raise ConsoleInputError(f"{what} {text!r} is not a time (yyyy-mm-ddThh:mm[:ss], or ms "
                            "since the epoch)")


def when(ms: object) -> str:
    """A time in ms since the epoch as the pages show it (local time, to the ms); "" for 0."""
    try:
        value = int(ms)  # type: ignore[call-overload]
        if value <= 0:
            return ""
        return (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value / 1000))
                + f".{value % 1000:03d}")
    except (TypeError, ValueError, OverflowError, OSError):  # not a time this host can show
        return str(ms)


def local_input(ms: float) -> str:
    """ms as a datetime-local input's value."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ms / 1000))
