"""ConsumerServices serving a read of pull answers (the I/O thread): the consume workers the
read filled are woken before the read's next pulls are written to the pull actor; the early
pulls of a read's dense answers leave in one write before any of their decodes."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Iterator
from types import SimpleNamespace

import pytest

from actors.client import client_channel as ch
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.consume_message_service import ConsumeExecutor
from actors.client.consumer.consumer_services import ConsumerServices
from actors.client.frame_ring import RingRef


class _Executor(ConsumeExecutor):
    """A ConsumeExecutor that notes its wake-ups (no worker thread is started)."""

    def __init__(self, events: list[str]) -> None:
        super().__init__(1, "test_consume")
        self.events = events

    def _wake(self) -> None:
        self.events.append("wake")
        super()._wake()


class _NotingEnd(ch.ChannelEnd):
    """The user's end of the pull channel, noting each write."""

    __slots__ = ("events",)

    def __init__(self, sock: socket.socket, events: list[str]) -> None:
        super().__init__(sock)
        self.events = events

    def send_records(self, recs: Iterable[ch.TypedRecord]) -> None:
        records = list(recs)
        self.events.append("write " + ",".join(type(r).__name__ for r in records))
        super().send_records(records)


class _Owner:
    """A consumer core's PullCallback: each answer is handed to the executor and the queue's
    next pull is sent, as PullCallback.on_pull_result does."""

    group = "cg"

    def __init__(self, services: ConsumerServices, executor: _Executor) -> None:
        self.services = services
        self.executor = executor

    def on_pull_result(self, answer: cc.PullAnswer, tail: memoryview) -> None:
        self.executor.submit([_Noop()])
        _next_pull(self.services, self)


def _next_pull(services: ConsumerServices, owner: object) -> None:
    """The next pull of the owner's queue, as PullCallback sends it."""
    rid = services.new_pull(owner)  # type: ignore[arg-type]
    services.send_pull(cc.PullCommand(rid, "127.0.0.1:10911", "cg", "T", 0, 1, 32, 0, 0, 15_000,
                                      None, 0, None, 30_000))  # fmt: skip


class _Noop:
    def run(self) -> None:
        pass


@pytest.fixture
def wired() -> Iterator[tuple[ConsumerServices, ch.ChannelEnd, ch.ChannelEnd, list[str]]]:
    # over TLS: the pull actor reads the broker connections and hands the answers over
    tls = SimpleNamespace(tls=SimpleNamespace(enable=True), credentials=None, serialize_type=0)
    services = ConsumerServices(SimpleNamespace(runtime=SimpleNamespace(loop=None),  # type: ignore[arg-type]
                                                client_id="c@1", config=tls),
                                1000.0, 1000.0, 1000.0)  # fmt: skip
    user_sock, actor_sock = socket.socketpair()
    events: list[str] = []
    end, actor = _NotingEnd(user_sock, events), ch.ChannelEnd(actor_sock)
    services.pull.on_open(end)
    try:
        yield services, end, actor, events
    finally:
        for close in (services.rings.close, end.close, actor.close):
            close()


def _serve(end: ch.ChannelEnd, services: ConsumerServices, answers: int) -> None:
    got: list[ch.Record] = []
    for _ in range(100):  # bounded: the records were written before
        records = end.read_records()
        assert records is not None
        got += records
        if len(got) == answers:
            break
    assert len(got) == answers
    services.pull.on_records(end, got)


@pytest.mark.parametrize("answers", [1, 3])
def test_a_read_wakes_its_consume_workers_before_it_writes_the_next_pulls(
        wired: tuple[ConsumerServices, ch.ChannelEnd, ch.ChannelEnd, list[str]],
        answers: int) -> None:  # fmt: skip
    """One wake-up per read, then one write carrying every next pull of the read."""
    services, end, actor, events = wired
    executor = _Executor(events)
    owner = _Owner(services, executor)
    for _ in range(answers):
        rid = services.new_pull(owner)
        actor.send(cc.PULL_RESULT, cc.pull_result_head(rid, 0, 2, 0, 2, 0) + b"body")
    _serve(end, services, answers)
    assert events == ["wake", "write Pull"]
    (pull,) = [ch.read_record(k, p) for k, p in actor.read_records() or []]
    assert isinstance(pull, cc.Pull) and len(pull.commands) == answers
    assert len(executor.items) == answers  # handed over, for the workers to run


def test_a_read_with_nothing_for_the_workers_still_writes_its_pulls(
        wired: tuple[ConsumerServices, ch.ChannelEnd, ch.ChannelEnd, list[str]]) -> None:
    """An answer that fills no executor (here: its owner is gone) wakes nobody; a pull sent
    meanwhile by the read still leaves in the read's one write."""
    services, end, actor, events = wired

    class _Gone:
        group = "cg"

        def on_pull_result(self, answer: cc.PullAnswer, tail: memoryview) -> None:
            _next_pull(services, self)

    rid = services.new_pull(_Gone())
    actor.send(cc.PULL_RESULT, cc.pull_result_head(rid, 0, 2, 0, 2, 0) + b"body")
    _serve(end, services, 1)
    assert events == ["write Pull"]


def test_dense_answers_of_one_read_send_every_next_pull_before_any_decode(
        wired: tuple[ConsumerServices, ch.ChannelEnd, ch.ChannelEnd, list[str]]) -> None:
    """Answers whose next pull leaves before their decode (PullCallback's early pulls) defer
    the decode with after_pulls_sent: the read's pulls leave in one write ahead of every
    decode (one write and one wake-up of the pull actor per read, not per answer); each
    answer's body in the ring stays readable until its decode has run, and its ring space is
    given back after it, with the workers woken first."""
    services, end, actor, events = wired
    executor = _Executor(events)
    fd = os.memfd_create("test_ring")
    os.ftruncate(fd, 4096)
    os.pwrite(fd, b"AAAABBBBCCCC", 0)
    services.rings.add(7, 4096, fd)

    class _Early:
        group = "cg"

        def on_pull_result(self, answer: cc.PullAnswer, tail: memoryview) -> None:
            _next_pull(services, self)

            def decode() -> None:
                events.append("decode " + bytes(tail).decode())
                executor.submit([_Noop()])

            services.after_pulls_sent(decode)

    owner = _Early()
    for i in range(3):
        rid = services.new_pull(owner)
        ref = RingRef(7, 100 + i, 4 * i, 4)
        actor.send(cc.PULL_AT, cc.pull_result_head(rid, 0, 2, 0, 2, 0) + cc.pull_at_ref(ref))
    _serve(end, services, 3)
    assert events == ["write Pull", "decode AAAA", "decode BBBB", "decode CCCC", "wake",
                      "write RingRelease"]  # fmt: skip
    got: list[ch.TypedRecord] = []
    for _ in range(100):  # bounded: both were written before
        got += [ch.read_record(k, p) for k, p in actor.read_records() or []]
        if len(got) >= 2:
            break
    pull, release = got
    assert isinstance(pull, cc.Pull) and len(pull.commands) == 3
    assert isinstance(release, cc.RingRelease)
    assert [tuple(t) for t in release.tokens] == [(7, 100), (7, 101), (7, 102)]
    assert len(executor.items) == 3
