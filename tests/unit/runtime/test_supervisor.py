"""The pure parts of supervision: the restart budget, exit causes, restart messages, roles."""

from __future__ import annotations

import signal
from typing import Any

from actors.broker.config import BrokerConfig
from actors.runtime.messages import BrokerStarted, NamesrvStarted, StartBroker, StartNamesrv
from actors.runtime.supervisor import (
    DEATH_WINDOW_MS,
    MAX_DEATHS,
    ChildRoles,
    RestartBudget,
    exit_cause,
    restart_message,
)
from actors.runtime.watch import EXIT_FAILED
from store.config import StoreConfig


def test_budget_replaces_until_max_deaths_within_the_window() -> None:
    budget = RestartBudget()
    t = 1_000_000
    assert [budget.died("send", t + i) for i in range(MAX_DEATHS)] == [True] * (MAX_DEATHS - 1) + [
        False
    ]
    assert budget.deaths("send", t + MAX_DEATHS) == MAX_DEATHS
    assert budget.died("pull", t)  # per role


def test_budget_forgets_deaths_older_than_the_window() -> None:
    budget = RestartBudget(max_deaths=3, window_ms=1000)
    assert budget.died("rs", 0)
    assert budget.died("rs", 500)
    assert budget.died("rs", 1200)  # the death at 0 left the window: 2 inside
    assert not budget.died("rs", 1300)
    assert budget.deaths("rs", 1300 + DEATH_WINDOW_MS) == 0
    assert budget.describe("rs", 1300) == "death 3 of 3 allowed within 1 s"


def test_exit_causes_name_the_signal_or_the_failure() -> None:
    assert exit_cause(-signal.SIGKILL) == "killed by SIGKILL"
    assert exit_cause(EXIT_FAILED).startswith("failed")
    assert exit_cause(0) == "exited with status 0"
    assert exit_cause(None) == "exited (status unknown)"


def test_restart_message_keeps_the_port_the_first_one_bound() -> None:
    start = StartNamesrv("127.0.0.1", 0)
    assert restart_message(start, NamesrvStarted(9877)) == StartNamesrv("127.0.0.1", 9877)
    fixed = StartNamesrv("127.0.0.1", 9876)
    assert restart_message(fixed, NamesrvStarted(9876)) is fixed
    broker = StartBroker(BrokerConfig(listenPort=0), StoreConfig(), "/tmp/x")
    assert restart_message(broker, BrokerStarted("127.0.0.1:10911", 10911)) is broker


class _Addr:
    """An address compared by value, as Thespian's are (and, like them, unhashable)."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Addr) and other.n == self.n


def test_child_roles_find_forget_and_replace_by_role() -> None:
    roles = ChildRoles()
    parent = object()  # no Thespian: processes unknown
    roles.add(parent, "send", _Addr(1))
    roles.add(parent, "pull", _Addr(2))
    assert roles.find(_Addr(2)).role == "pull"  # type: ignore[union-attr]
    roles.add(parent, "send", _Addr(3))  # a replacement: the old one is no longer watched
    assert roles.find(_Addr(1)) is None
    assert roles.remove(_Addr(3)).role == "send"  # type: ignore[union-attr]
    assert roles.remove(_Addr(3)) is None  # a second exit notice of the same child
    assert roles.forget("pull") is not None and roles.by_role("pull") is None
    assert roles.pids() == {}
