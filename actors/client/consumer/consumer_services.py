"""The consumer services of one client instance, as the user's process sees them.

Mirrors the part of MQClientInstance.java a consumer uses (its RebalanceService and
PullMessageService, registerConsumer / unregisterConsumer), RocketMQ 4.9.x. The first consumer
of an instance starts the two actors (RebalanceServiceActor, PullMessageServiceActor) and
serves their channels; later consumers of the instance share them; the last one stops them.
Channel records are dispatched to the consumer cores by group (rebalance records) and by
request id (pull results), on the I/O thread. Over plain TCP the pulls are written and their
answers read here, on the broker connections the pull actor made and handed over
(shared_pull_connection); over TLS they go to the pull actor in PULL records. Pull commands
made while the I/O thread serves a read of answers are written at once when the read is
served and its consume workers are woken: a write ahead of them delayed the handlers by about
100 us (docs/CLIENT.md). A read whose answers were decoded first (single messages, the
latency case) hands idle workers the GIL before that write (HeldWakes' hand-over); a read
whose next pulls left ahead of its decodes (dense answers) does not wait.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from actors.client import client_channel as ch
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.consume_message_service import HAND_OVER_S, HeldWakes
from actors.client.consumer.messages import (
    AddConsumer,
    ConsumerAdded,
    ConsumerRemoved,
    PullServiceStarted,
    RebalanceServiceStarted,
    RemoveConsumer,
    ServiceStartFailed,
    StartPullService,
    StartRebalanceService,
    UpdateSubscriptions,
)
from actors.client.consumer.shared_pull_connection import (
    Answers,
    PullDeadlines,
    SharedPullConnections,
    shares_connections,
)
from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.event_loop import run_calls
from actors.client.frame_ring import MappedRings, RingRef
from actors.client.mq_client_instance import TopicRouteTable
from actors.client.mq_client_manager import InstanceHandle
from protocol.bodies import MessageQueue

log = logging.getLogger(__name__)

CHANNEL_TIMEOUT_S: Final = 10.0
ASK_TIMEOUT_S: Final = 30.0
SCAN_S: Final = 1.0  # the shared connections' pulls are timed out this often (Java: 1 s)
RID_SPAN: Final = 0x7FFFFFFF  # request ids are opaques on shared connections: int32, > 0


class ConsumerCore(Protocol):
    """What the services call on a consumer core (I/O thread)."""

    group: str

    def on_rebalance_record(self, rec: cc.GroupRecord) -> None:
        """Assign / Revoke / LockStates / Relay / PersistGroup / QueuesChanged for this
        group."""


class PullOwner(Protocol):
    """Whose pulls' answers the services hand back (a core's PullCallback; I/O thread)."""

    @property
    def group(self) -> str:
        """The consumer group pulling."""
        ...

    def on_pull_result(self, answer: cc.PullAnswer, tail: cc.PullBody) -> None:
        """The answer of one of its pulls (tail: the pull body, or the remark)."""


class _End:
    """A channel key's handler: remembers the end, forwards records."""

    def __init__(self, on_records: Callable[[list[ch.Record]], None], name: str) -> None:
        self.end: ch.ChannelEnd | None = None
        self.opened = threading.Event()
        self.on_records_cb = on_records
        self.name = name
        self.on_closed_cb: Callable[[], None] | None = None

    def on_open(self, end: ch.ChannelEnd) -> None:
        self.end = end
        self.opened.set()

    def on_records(self, end: ch.ChannelEnd, records: list[ch.Record]) -> None:
        self.on_records_cb(records)

    def on_closed(self, end: ch.ChannelEnd) -> None:
        self.end = None
        log.warning("%s channel closed", self.name)
        if self.on_closed_cb is not None:
            self.on_closed_cb()


class ConsumerServices:
    """RebalanceService + PullMessageService of one client instance (reference counted)."""

    _lock = threading.Lock()
    _by_client: dict[str, ConsumerServices] = {}

    @classmethod
    def acquire(cls, handle: InstanceHandle, *, interval_ms: float = 20_000.0,
                lock_interval_ms: float = 20_000.0, retry_ms: float = 1_000.0
                ) -> ConsumerServices:  # fmt: skip
        """The services of handle's instance (started by the first consumer)."""
        with cls._lock:
            s = cls._by_client.get(handle.client_id)
            if s is None or s.closed:
                s = cls(handle, interval_ms, lock_interval_ms, retry_ms)
                try:
                    s._start()
                except BaseException:
                    s._stop()
                    raise
                cls._by_client[handle.client_id] = s
            s.refs += 1
            return s

    def release(self) -> None:
        """One consumer less; the last one stops the actors."""
        with ConsumerServices._lock:
            self.refs -= 1
            if self.refs > 0:
                return
            self.closed = True
            if ConsumerServices._by_client.get(self.handle.client_id) is self:
                del ConsumerServices._by_client[self.handle.client_id]
        self._stop()

    def __init__(self, handle: InstanceHandle, interval_ms: float, lock_interval_ms: float,
                 retry_ms: float) -> None:
        self.handle = handle
        self.runtime = handle.runtime
        self.client_id = handle.client_id
        self.intervals = (interval_ms, lock_interval_ms, retry_ms)
        self.refs = 0
        self.closed = False
        self.cores: dict[str, ConsumerCore] = {}
        self.pulls: dict[int, PullOwner] = {}
        self.rids = itertools.count(1)
        self.rebalance_key = f"rebalance:{self.client_id}"
        self.pull_key = f"pull:{self.client_id}"
        self.rebalance = _End(self._on_rebalance_records, self.rebalance_key)
        self.pull = _End(self._on_pull_records, self.pull_key)
        self.rings = MappedRings()  # the pull actor's rings, mapped read-only (I/O thread)
        # plain TCP: the broker connections the pull actor made, written and read here
        # (shared_pull_connection), and the pulls waiting for one being made, by broker
        self.direct = shares_connections(handle.config)
        self.deadlines = PullDeadlines()
        frames = cc.PullCommandFrames(handle.config.credentials, handle.config.serialize_type)
        self.conns = SharedPullConnections(self.runtime.loop, frames, self.deadlines,
                                           self._answers_pass, self._conn_lost)  # fmt: skip
        self.pull.on_closed_cb = self._pull_channel_closed
        self.rebalance_actor: Any = None
        self.pull_actor: Any = None
        self._outbox: list[cc.PullCommand] = []
        self._settling: dict[int, threading.Event] = {}  # commit pulls waited for, by rid
        self._out_lock = threading.Lock()
        self._batching = threading.local()
        # what the I/O thread's pass over one read runs after that read's pulls are written
        # (decodes of answers whose next pull left first), with each one's ring space
        self._after_pulls: list[tuple[Callable[[], None] | None, RingRef | None]] = []
        self._after_wake: list[Callable[[], None]] = []  # the pass's after_wake work
        self._ask_lock = threading.Lock()

    @property
    def routes(self) -> TopicRouteTable:
        """The instance's routes (kept current by the instance actor)."""
        return self.handle.table

    # -- start / stop -------------------------------------------------------------------------
    def _start(self) -> None:
        from actors.client.consumer.pull_message_service_actor import PullMessageServiceActor
        from actors.client.consumer.rebalance_service_actor import RebalanceServiceActor

        rt = self.runtime
        rt.add_channel_handler(self.pull_key, self.pull)
        rt.add_channel_handler(self.rebalance_key, self.rebalance)
        self.pull_actor, reply = rt.create_actor(
            PullMessageServiceActor,
            StartPullService(self.client_id, self.handle.config, rt.channel_path),
            (PullServiceStarted, ServiceStartFailed))
        if isinstance(reply, ServiceStartFailed):
            raise MQClientError(ClientErrorCode.CLIENT_CLOSED,
                                f"PullMessageService failed to start: {reply.reason}")
        interval, lock_interval, retry = self.intervals
        self.rebalance_actor, reply = rt.create_actor(
            RebalanceServiceActor,
            StartRebalanceService(self.client_id, self.handle.config, self.handle.actor,
                                  rt.channel_path, interval, lock_interval, retry),
            (RebalanceServiceStarted, ServiceStartFailed))
        if isinstance(reply, ServiceStartFailed):
            raise MQClientError(ClientErrorCode.CLIENT_CLOSED,
                                f"RebalanceService failed to start: {reply.reason}")
        for e in (self.pull, self.rebalance):
            if not e.opened.wait(CHANNEL_TIMEOUT_S):
                raise MQClientError(ClientErrorCode.CLIENT_CLOSED,
                                    f"{e.name} did not connect its channel")
        if self.direct:
            rt.loop.call_later(SCAN_S, self._scan)

    def _stop(self) -> None:
        rt = self.runtime
        for e in (self.pull, self.rebalance):
            if e.end is not None:
                e.end.send_record(ch.Bye())
        rt.remove_channel_handler(self.pull_key)
        rt.remove_channel_handler(self.rebalance_key)
        rt.loop.call_soon(self.rings.close)  # on the I/O thread, after any pass reading them
        rt.loop.call_soon(self.conns.close_all)
        for actor in (self.pull_actor, self.rebalance_actor):
            if actor is not None:
                rt.stop_actor(actor)

    # -- Thespian requests (control only) -------------------------------------------------------
    def _ask(self, msg: Any, expect: type, group: str, timeout_s: float = ASK_TIMEOUT_S) -> Any:
        """Tell the rebalance actor msg; wait for a reply of type expect for group."""
        with self._ask_lock:
            reply = self.runtime.ask(self.rebalance_actor, msg, (expect,),
                                     lambda r: getattr(r, "group", None) == group, timeout_s)
        if reply is None:
            raise MQClientError(ClientErrorCode.CLIENT_CLOSED,
                                f"RebalanceService did not answer {type(msg).__name__} for {group}")
        return reply

    def add_consumer(self, core: ConsumerCore, consumer_data: bytes, strategy: Any,
                     orderly: bool, rebalance: bool = True) -> None:
        """Register core's group: rebalanced from now on (raises when refused)."""
        self.cores[core.group] = core
        reply = self._ask(AddConsumer(core.group, consumer_data, strategy, orderly, rebalance),
                          ConsumerAdded, core.group)
        if not reply.ok:
            self.cores.pop(core.group, None)
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                f"consumer group {core.group}: {reply.reason}")

    def update_subscriptions(self, group: str, consumer_data: bytes) -> None:
        """The group's subscriptions changed (heartbeat and rebalance at once)."""
        self.runtime.tell(self.rebalance_actor, UpdateSubscriptions(group, consumer_data))

    def remove_consumer(self, group: str, timeout_s: float = 10.0) -> None:
        """Unregister the group from every broker (its offsets must be persisted before)."""
        try:
            self._ask(RemoveConsumer(group), ConsumerRemoved, group, timeout_s)
        except MQClientError as exc:
            log.warning("consumer %s: unregister not confirmed: %s", group, exc)
        finally:
            self.cores.pop(group, None)

    def rebalance_now(self, group: str) -> None:
        """Ask for a rebalance round of group."""
        end = self.rebalance.end
        if end is not None:
            end.send_record(cc.RebalanceNow(group))

    def revoked(self, group: str, mqs: list[MessageQueue]) -> None:
        """Tell the RebalanceService queues were released."""
        end = self.rebalance.end
        if end is not None and mqs:
            end.send_record(cc.Revoked(group, tuple(mqs)))

    def relay_answer(self, rid: int, frame: bytes | None) -> None:
        """Answer a relayed broker request."""
        end = self.rebalance.end
        if end is not None:
            end.send_record(cc.RelayAnswer(rid, frame))

    # -- pulls ----------------------------------------------------------------------------------
    def new_pull(self, owner: PullOwner) -> int:
        """A request id whose result goes to owner."""
        rid = self.new_rid()
        self.pulls[rid] = owner
        return rid

    def new_rid(self) -> int:
        """A request id whose result goes to no core (a settle's)."""
        return (next(self.rids) - 1) % RID_SPAN + 1

    def forget_pulls(self, owner: PullOwner) -> None:
        """Drop owner's outstanding request ids (it closed; late results are ignored)."""
        for rid, c in list(self.pulls.items()):
            if c is owner:
                self.pulls.pop(rid, None)

    def send_pull(self, cmd: cc.PullCommand) -> None:
        """Queue a pull; sent now, or at the end of the I/O thread's batch."""
        if self.direct:
            self.deadlines.sent(cmd.rid, cmd.addr, cmd.timeout_ms)
        with self._out_lock:
            self._outbox.append(cmd)
        if not getattr(self._batching, "on", False):
            self._flush_pulls()

    def after_pulls_sent(self, fn: Callable[[], None]) -> None:
        """Run fn once the pulls queued so far are written. In the I/O thread's pass over a
        read of answers: after the pass has read every answer, so that the next pulls of all
        of them leave in one write ahead of all their decodes (the answer's pull body stays
        readable until fn has run). Elsewhere: now."""
        if getattr(self._batching, "on", False):
            self._after_pulls.append((fn, None))
        else:
            self._flush_pulls()
            fn()

    def after_wake(self, fn: Callable[[], None]) -> None:
        """Run fn once the consume workers this pass filled are woken and any hand-over of
        the GIL to one of them is over (after the pass's HeldWakes block): in the I/O
        thread's pass, the next pull of a sparse answer is made after its short handler
        call, not while the woken worker waits for the GIL. Elsewhere: now."""
        if getattr(self._batching, "on", False):
            self._after_wake.append(fn)
        else:
            fn()

    def _run_after_wake(self) -> None:
        while self._after_wake:  # what the calls defer runs too, behind them
            work, self._after_wake = self._after_wake, []
            run_calls(work, "pull answer handling")

    def settle(self, cmds: list[cc.PullCommand], timeout_s: float) -> bool:
        """Send cmds behind every pull sent before them; True once each is answered (within
        timeout_s). Their answers go to no core."""
        events = [self._settling.setdefault(c.rid, threading.Event()) for c in cmds]
        try:
            with self._out_lock:
                self._outbox.extend(cmds)
            if self.direct:
                for c in cmds:
                    self.deadlines.sent(c.rid, c.addr, c.timeout_ms)
            self._flush_pulls()
            deadline = time.monotonic() + timeout_s
            return all(ev.wait(max(0.0, deadline - time.monotonic())) for ev in events)
        finally:
            for c in cmds:
                self._settling.pop(c.rid, None)

    def _flush_pulls(self, first: cc.RingRelease | None = None) -> None:
        """Send the queued pull commands: over plain TCP, written on their brokers'
        connections; over TLS, to the pull actor in one record, after `first`."""
        with self._out_lock:  # under the lock: each broker's pulls leave in command order
            cmds, self._outbox = self._outbox, []
            recs: list[ch.TypedRecord] = [] if first is None else [first]
            if cmds:
                if self.direct:
                    recs += [cc.ConnWanted(addr) for addr in self.conns.send(cmds)]
                else:
                    recs.append(cc.Pull(tuple(cmds)))
            end = self.pull.end
            if recs and end is not None:
                end.send_records(recs)

    # -- channel records (I/O thread) -----------------------------------------------------------
    def _read_pass(self, serve: Callable[[], None],
                   first: Callable[[], cc.RingRelease | None] = lambda: None) -> None:
        """One read of pull answers (the channel's, a shared connection's), served in one
        pass: the consume workers woken once; the next pulls queued and written in one record
        (after `first`): ahead of the decodes when the answers were dense (after_pulls_sent),
        else once the workers are woken and, idle and fast, handed the GIL (HeldWakes)."""
        hold = HeldWakes(HAND_OVER_S)
        self._batching.on = True
        try:
            with hold:
                try:
                    serve()
                finally:
                    if self._run_after_pulls():
                        hold.hand_over_s = 0.0  # its next pulls left first: no hand-over
        finally:  # the workers are woken, any hand-over over: now the next pulls
            try:
                self._run_after_wake()
            finally:
                self._batching.on = False
                self._flush_pulls(first())

    def _on_pull_records(self, records: list[ch.Record]) -> None:
        self._read_pass(lambda: self._handle_pull_records(records), self._ring_release)

    def _ring_release(self) -> cc.RingRelease | None:
        owed = self.rings.take_owed()
        return cc.RingRelease(tuple(owed)) if owed else None

    def _handle_pull_records(self, records: list[ch.Record]) -> None:
        for kind, payload in records:
            try:
                self._pull_record(kind, payload)
            except ch.ChannelError as exc:  # our own actor wrote it: the channel is broken
                log.error("pull channel: corrupt record (kind %d): %s; closing", kind, exc)
                end = self.pull.end
                if end is not None:
                    end.close()
                break

    def _run_after_pulls(self) -> bool:
        """The pass's deferred work (after_pulls_sent), once its pulls are written; each
        answer's ring space is given back after its work, once nothing refers to it. Work
        that the work defers runs too, behind it. True when there was any."""
        if not self._after_pulls:
            return False
        while self._after_pulls:  # bounded: each round runs what the one before deferred
            work, self._after_pulls = self._after_pulls, []
            self._flush_pulls()
            for i in range(len(work)):
                fn, ref = work[i]
                work[i] = (None, None)
                try:
                    assert fn is not None
                    fn()
                except Exception:
                    log.exception("pull answer handling failed")
                finally:
                    del fn  # the last reference to the answer's view: the ring may close now
                    if ref is not None:
                        self.rings.done(ref)
        return True

    def _pull_record(self, kind: int, payload: memoryview) -> None:
        rings = self.rings
        if kind == cc.PULL_RESULT:
            self._on_pull_answer(*cc.PullAnswer.read(payload))
        elif kind == cc.PULL_AT:
            answer, ref = cc.read_pull_at(payload)
            try:
                tail = rings.view(ref)
            except (KeyError, ValueError) as exc:  # a ring we could not map
                log.error("pull answer in ring %d not readable: %r", ref.ring_id, exc)
                answer = answer._replace(status=cc.NO_ANSWER)  # pulled again later
                tail = memoryview(b"pull ring not mapped")
            deferred = len(self._after_pulls)
            try:
                self._on_pull_answer(answer, tail)
            finally:
                del tail
                if len(self._after_pulls) > deferred:  # its decode waits for the pass's pulls
                    fn, _ = self._after_pulls[-1]
                    self._after_pulls[-1] = (fn, ref)
                else:
                    rings.done(ref)  # the answer's bytes were copied out, or dropped
        elif kind == cc.CONN_SHARED:
            self._adopt(kind, payload)
        elif kind == cc.CONN_FAILED:
            rec = ch.read_record(kind, payload)
            assert isinstance(rec, cc.ConnFailed)
            self._no_conn(rec.addr, rec.reason)
        elif kind == cc.RING_SHARED:
            self._map_ring(kind, payload)
        elif kind == cc.RING_RETIRED:
            rec = ch.read_record(kind, payload)
            assert isinstance(rec, cc.RingRetired)
            rings.retire(rec.ring_id)
        else:
            raise ch.ChannelError(f"unknown record kind {kind}")

    def _with_fd(self, kind: int, payload: memoryview) -> tuple[ch.TypedRecord, int | None]:
        """A record that carries a descriptor, and the descriptor (None: it did not arrive);
        a record that does not read closes its descriptor."""
        end = self.pull.end
        fd = None if end is None else end.next_fd()
        try:
            return ch.read_record(kind, payload), fd
        except ch.ChannelError:
            if fd is not None:
                os.close(fd)
            raise

    def _map_ring(self, kind: int, payload: memoryview) -> None:
        """Map a RingShared's ring; one that cannot be mapped is refused (its answers then
        come by copy)."""
        end = self.pull.end
        rec, fd = self._with_fd(kind, payload)
        assert isinstance(rec, cc.RingShared)
        try:
            self.rings.add(rec.ring_id, rec.size, fd)  # closes fd
        except (OSError, ValueError) as exc:
            log.error("pull ring %d not mapped: %r; its answers will be copied", rec.ring_id,
                      exc)  # fmt: skip
            if end is not None:
                end.send_record(cc.RingRefused(rec.ring_id))

    # -- the shared connections (I/O thread) ----------------------------------------------------
    def _adopt(self, kind: int, payload: memoryview) -> None:
        """Own a ConnShared's connection from now on: the pulls waiting for it are written
        first; one that cannot be watched is closed (the pulls for its broker fail)."""
        rec, fd = self._with_fd(kind, payload)
        assert isinstance(rec, cc.ConnShared)
        if self.closed and fd is not None:  # stopping
            os.close(fd)
            return
        try:
            if fd is None:
                raise OSError("its descriptor did not arrive")
            self.conns.adopt(rec.conn_id, rec.addr, fd)
        except OSError as exc:
            log.error("pull connection %d to %s not used: %r", rec.conn_id, rec.addr, exc)
            self._no_conn(rec.addr, f"not used: {exc}")

    def _no_conn(self, addr: str, reason: str) -> None:
        """No connection to addr was made: the pulls waiting for one fail."""
        self.conns.no_conn(addr)
        self._fail(self.deadlines.of_broker(addr), reason)

    def _conn_lost(self, conn_id: int, addr: str, reason: str) -> None:
        """A connection failed (closed): the pulls out on its broker fail."""
        self._fail(self.deadlines.of_broker(addr), reason)

    def _fail(self, rids: list[int], reason: str) -> None:
        """The pulls rids get no answer (their connection failed, or their time passed)."""
        if rids:
            why = memoryview(reason.encode())
            self._answers_pass([(cc.PullAnswer(rid, cc.NO_ANSWER, 0, 0, 0, 0), why)
                                for rid in rids])  # fmt: skip

    def _scan(self) -> None:
        """Time out the pulls out on shared connections (scanResponseTable)."""
        if self.closed:
            return
        self._fail(self.deadlines.expired(time.monotonic()), "pull timed out")
        self.conns.prune()
        self.runtime.loop.call_later(SCAN_S, self._scan)

    def _pull_channel_closed(self) -> None:
        """The pull actor is gone: its rings and the connections it made with it."""
        self.rings.close()
        self.conns.close_all()
        self._fail(self.deadlines.all(), "the pull service stopped")

    def _answers_pass(self, answers: Answers) -> None:
        """The answers of one read of a shared connection, handed over as a read of the
        channel's is (_on_pull_records): the workers woken once, every next pull in one write
        ahead of the decodes. Inside such a pass already: handed to it."""
        if getattr(self._batching, "on", False):
            self._hand_answers(answers)
        else:
            self._read_pass(lambda: self._hand_answers(answers))

    def _hand_answers(self, answers: Answers) -> None:
        for answer, tail in answers:
            self._on_pull_answer(answer, tail)

    def _on_pull_answer(self, answer: cc.PullAnswer, tail: cc.PullBody) -> None:
        self.deadlines.answered(answer.rid)
        owner = self.pulls.pop(answer.rid, None)
        if owner is None:
            ev = self._settling.get(answer.rid)
            if ev is not None:
                ev.set()
            return
        try:
            owner.on_pull_result(answer, tail)
        except Exception:
            log.exception("consumer %s: pull result handling failed", owner.group)

    def _on_rebalance_records(self, records: list[ch.Record]) -> None:
        self._batching.on = True
        try:
            for kind, payload in records:
                try:
                    rec = ch.read_record(kind, payload)
                except ch.ChannelError as exc:
                    log.warning("rebalance channel: %s", exc)
                    continue
                if not isinstance(rec, cc.GroupRecord):
                    log.warning("rebalance channel: unexpected %s", type(rec).__name__)
                    continue
                core = self.cores.get(rec.group)
                if core is None:
                    continue
                try:
                    core.on_rebalance_record(rec)
                except Exception:
                    log.exception("consumer %s: rebalance record %s failed", core.group,
                                  type(rec).__name__)  # fmt: skip
        finally:
            self._batching.on = False
            self._flush_pulls()
