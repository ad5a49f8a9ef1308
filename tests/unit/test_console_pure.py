"""The console's pure pieces: the chart history (window, pruning, no NaN), the Host rule
against DNS rebinding, times typed into forms and shown on pages, body previews, and group
names from URLs."""

from __future__ import annotations

import math

import pytest

from deploy.console.app import _host_allowed
from deploy.console.consumer_service import checked_group
from deploy.console.history import MetricsHistory
from deploy.console.message_service import body_preview, short_preview
from deploy.console.pages import parse_ms, when
from deploy.console.topic_service import ConsoleInputError


def test_history_keeps_the_window_and_forgets_series_gone_quiet() -> None:
    h = MetricsHistory(window_s=60)
    h.add(0, "lag/g/T a/0", 5)
    h.add(30, "lag/g/T a/0", 3)
    h.add(30, "tps_in/b", math.nan)  # dropped: JSON has no NaN
    h.add(30, "tps_in/b", math.inf)
    assert h.points("lag/g/T a/0") == [(0, 5), (30, 3)] and h.points("tps_in/b") == []
    h.add(70, "lag/g/T a/1", 1)
    h.prune(70)
    assert h.chart("lag/g/") == {"T a/0": [(30, 3)], "T a/1": [(70, 1)]}
    h.prune(200)
    assert h.chart("lag/") == {}


@pytest.mark.parametrize(("server", "host", "ok"), [
    ("127.0.0.1", "127.0.0.1:8080", True), ("127.0.0.1", "localhost:8080", True),
    ("127.0.0.1", "evil.example:8080", False), ("127.0.0.1", "127.0.0.2", True),
    ("::1", "[::1]:8080", True), ("::1", "rebound.example", False),
    ("0.0.0.0", "console.corp:8080", True), ("10.0.0.5", "anything", True),
])  # fmt: skip
def test_a_loopback_console_answers_loopback_names_only(server: str, host: str,
                                                        ok: bool) -> None:  # fmt: skip
    assert _host_allowed(server, host) is ok


def test_times_typed_and_shown() -> None:
    assert parse_ms("1700000000000", "t") == 1700000000000
    for bad in ("-1", "0", "yesterday", ""):
        with pytest.raises(ConsoleInputError):
            parse_ms(bad, "the reset time")
    assert abs(parse_ms(when(1700000000123)[:19].replace(" ", "T"), "t") - 1700000000000) < 1000
    assert when(0) == "" and when(10**30) == str(10**30) and when("x") == "x"
    assert when(1700000000123).endswith(".123")


def test_body_previews() -> None:
    assert body_preview(b'{"a": [1]}').kind == "json"
    assert body_preview(b'{"a": [1]}', "text") == body_preview(b'{"a": [1]}', "text")
    assert body_preview(b'{"a": [1]}', "text").text == '{"a": [1]}'
    assert body_preview(b"[" * 100_000).kind == "text"  # too deep to unfold: shown as it is
    hexed = body_preview(bytes(range(20)))
    assert hexed.kind == "hex" and hexed.text.splitlines()[1].startswith("00000010  10 11 12 13")
    assert body_preview(b"x" * 70_000).truncated
    assert short_preview(b"\xff\x00") == "ff 00" and short_preview(b"<b>") == "<b>"


def test_group_names_from_urls() -> None:
    assert checked_group("%RETRY%odd group") == "%RETRY%odd group"
    for bad in ("", "  ", "a\nb", "g" * 256):
        with pytest.raises(ConsoleInputError):
            checked_group(bad)
