"""The console's count of actor replacements (deploy/console/actor_metrics.py): a process that
replaces one of a role counts, a second process of a role running beside the first does not,
and a role that stops counts nothing."""

from __future__ import annotations

from deploy.console.actor_metrics import ActorMetrics, ActorProcess


def _p(pid: int, role: str, start: int = 0) -> ActorProcess:
    return ActorProcess(pid, role, 0.0, 0, start or pid)


def test_replacements_by_role() -> None:
    m = ActorMetrics()
    m.observe([_p(10, "send"), _p(11, "pull")])
    m.observe([_p(10, "send"), _p(11, "pull"), _p(12, "pull")])  # two pull brokers: not one
    assert (m.replacements("send"), m.replacements("pull")) == (0, 0)
    m.observe([_p(20, "send"), _p(11, "pull"), _p(12, "pull")])  # send killed and replaced
    m.observe([_p(21, "send"), _p(12, "pull")])  # again; one pull stopped, not replaced
    assert (m.replacements("send"), m.replacements("pull")) == (2, 0)
    m.observe([_p(21, "send", start=99)])  # a pid reused by a new process is a new one
    assert m.replacements("send") == 3 and m.replacements("gone") == 0
