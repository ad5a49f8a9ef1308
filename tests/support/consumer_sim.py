"""The world around a push consumer's core, simulated: a seeded event loop, the consumer's
scheduler thread and consume workers, its pull actor's connection and a broker.

Used by the consumer simulations (tests/unit/client/test_*simulation*.py). The broker model
stores a pull's commit offset when it first processes the pull (each connection's pulls in the
order they were written), holds a pull with the suspend flag until a message comes or HELD_MS
pass, and applies UPDATE_CONSUMER_OFFSET at once (another processor than the pulls'). It
records a violation when a pull a consumer sent before its own final commit of a queue (a
revoke's, a reset's, a close's) stores another offset after that commit (one equal to it is
harmless; whether it overwrites what a new owner committed meanwhile is RocketMQ's overlap of
owners, which re-delivers but loses nothing).
"""

from __future__ import annotations

import functools
import heapq
import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from actors.broker.consumer_manager import ClientChannel, ConsumerManager
from actors.broker.lock_manager import RebalanceLockManager
from actors.broker.offsets import ConsumerOffsetManager
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.consume_concurrently import ConsumeMessageConcurrentlyService
from actors.client.consumer.consume_message_service import ConsumeResult, run_each
from actors.client.consumer.consume_orderly import ConsumeMessageOrderlyService
from actors.client.consumer.consumer_config import ServiceState
from actors.client.consumer.default_mq_push_consumer_impl import (
    DefaultMQPushConsumerImpl,
    PushConsumerConfig,
)
from actors.client.consumer.offset_store import RemoteBrokerOffsetStore
from actors.client.mq_client_instance import FindBrokerResult
from actors.client.records import PullStatus
from protocol.bodies import ConsumeFromWhere, MessageQueue, SubscriptionData
from protocol.codes import PullSysFlag
from protocol.message import MessageExt as WireExt
from protocol.message import encode_message_ext
from protocol.record import pack_host

TOPIC = "SimT"
GROUP = "sim_cg"
ADDR = "127.0.0.1:10911"
HELD_MS = 40  # the broker holds a pull this long (15 s on a real one): NO_NEW answers happen
LOCK_LIVE_MS = 400  # a broker lock not renewed lapses (60 s on a real one)
PULL_TIMEOUT_MS = 60  # a pull the broker never answers fails this late (30 s on a real client)


class Sim:
    """A seeded event loop over simulated milliseconds (ties broken by insertion order)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = 0
        self.depth = 0

    def at(self, delay_ms: float, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (self.now + delay_ms, self.seq, fn))

    def step(self) -> bool:
        if not self.heap:
            return False
        when, _, fn = heapq.heappop(self.heap)
        self.now = max(self.now, when)
        fn()
        return True


class SimScheduler:
    """The consumer's scheduler thread: tasks run one at a time in (due, submission) order,
    as ConsumerScheduler runs them, each at a moment the loop picks at or after its due time
    (other events interleave, as other threads do)."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = 0

    def schedule(self, delay_ms: float, fn: Callable[[], None]) -> None:
        delay = max(delay_ms, 0.0)
        self.seq += 1
        heapq.heappush(self.heap, (self.sim.now + delay, self.seq, fn))
        self.sim.at(delay + self.sim.rng.choice((0.0, 0.1, 1.0, 8.0)), self._run_one)

    def submit(self, fn: Callable[[], None]) -> None:
        self.schedule(0.0, fn)

    def _run_one(self) -> None:
        if self.heap and self.heap[0][0] <= self.sim.now:
            heapq.heappop(self.heap)[2]()

    def on_thread(self) -> bool:
        return True

    def stop(self) -> None:
        self.heap.clear()


class SimExecutor:
    """The consume workers: requests wait here until the loop runs them."""

    def __init__(self, sim: Sim, run_batch: Callable[[Sequence[Any]], None],
                 busy: Callable[[Any], bool] = lambda req: False) -> None:  # fmt: skip
        self.sim = sim
        self.run_batch = run_batch
        self.busy = busy  # a request whose lock a running handler holds waits (a worker blocks)
        self.items: deque[Any] = deque()
        self.stopped = False

    def start(self) -> None:
        pass

    def submit(self, requests: Any) -> None:
        if self.stopped:
            return
        self.items.extend(requests)
        self.sim.at(self.pause(), self.work)

    def pause(self) -> float:
        """Until a worker takes the next requests: mostly soon, at times much later."""
        return self.sim.rng.choice((0.2, 1.0, 3.0, 30.0))

    def work(self) -> None:
        if self.stopped or not self.items:
            return
        n = self.sim.rng.randint(1, 4)
        batch = [self.items.popleft() for _ in range(min(n, len(self.items)))]
        waiting = [r for r in batch if self.busy(r)]
        if waiting:
            batch = [r for r in batch if not self.busy(r)]
            self.items.extend(waiting)
        if self.items:
            self.sim.at(self.pause(), self.work)
        if batch:
            self.run_batch(batch)

    def queued(self) -> int:
        return len(self.items)

    def shutdown(self, timeout_s: float) -> bool:
        self.stopped = True
        self.items.clear()
        return True


class Broker:
    """One broker: its queues, and the broker's own cores for the group's offsets
    (ConsumerOffsetManager, persisted as consumerOffset.json's text every FLUSH_MS), its members
    (ConsumerManager, fed by heartbeats) and the orderly locks (RebalanceLockManager). Each
    consumer reaches it over a Conn. `restart` is a kill -9 and start: offsets back to the last
    flush, members and locks forgotten, every pull on its way or held lost."""

    def __init__(self, sim: Sim, queues: int) -> None:
        self.sim = sim
        self.count = dict.fromkeys(range(queues), 0)
        self.held: list[tuple[Conn, cc.PullCommand]] = []
        self.clock = 0  # sequence of pulls written and final commits
        self.violations: list[str] = []
        self.offsets = ConsumerOffsetManager()
        self.saved = ""  # the last flushed consumerOffset.json
        self.consumers = ConsumerManager()
        self.locks = RebalanceLockManager(max_live_ms=LOCK_LIVE_MS)
        self.conns: list[Conn] = []
        self.restarts = 0
        # orderly queues two consumers were in a handler of at once: none unless the broker
        # restarted (its locks live in memory: another consumer may lock a queue whose old
        # owner consumes on until its next lockAll finds the lock gone; Java's window too)
        self.overlaps: list[str] = []

    def committed(self, qid: int) -> int:
        """The group's stored offset of a queue (-1: none)."""
        return self.offsets.query_offset(GROUP, TOPIC, qid)

    def commit(self, qid: int, offset: int) -> None:
        self.offsets.commit_offset(GROUP, TOPIC, qid, offset)

    def flush(self) -> None:
        """ConsumerOffsetManager's periodic persist."""
        self.saved = self.offsets.encode()

    def cids(self) -> list[str]:
        """The group's consumer ids (GET_CONSUMER_LIST_BY_GROUP)."""
        return sorted(ch.client_id for ch in self.consumers.live_channels(GROUP))

    def heartbeat(self, conn: Conn) -> bool:
        """A consumer's heartbeat; True when the group's members changed (notify them)."""
        channel = ClientChannel(conn.conn_id, conn.name, 0, 0, int(self.sim.now))
        _changed, notify = self.consumers.register(
            GROUP, channel, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET",
            [SubscriptionData.build(TOPIC, "*")])  # fmt: skip
        return notify

    def restart(self) -> None:
        self.restarts += 1
        self.offsets = ConsumerOffsetManager()
        if self.saved:
            self.offsets.decode(self.saved)
        self.consumers = ConsumerManager()
        self.locks = RebalanceLockManager(max_live_ms=LOCK_LIVE_MS)
        lost = [(conn, cmd) for conn, cmd in self.held]
        self.held = []
        for conn in self.conns:
            lost += [(conn, cmd) for cmd, _ in conn.inbound]
            conn.inbound.clear()
        for conn, cmd in lost:  # the client's call times out
            conn.no_answer(cmd)

    def produce(self, qid: int, n: int) -> None:
        self.count[qid] += n
        woken = [h for h in self.held if h[1].queue_id == qid]
        self.held = [h for h in self.held if h[1].queue_id != qid]
        for conn, cmd in woken:
            conn.found(cmd)

    def tick(self) -> int:
        self.clock += 1
        return self.clock


class Conn:
    """A consumer's view of the broker: its pull connection (commands served in the order
    written), UPDATE / QUERY_CONSUMER_OFFSET (OffsetBroker) and the max offset (admin)."""

    def __init__(self, broker: Broker, name: str) -> None:
        self.broker = broker
        self.sim = broker.sim
        self.name = name
        self.conn_id = len(broker.conns) + 1
        broker.conns.append(self)
        self.inbound: deque[tuple[cc.PullCommand, int]] = deque()  # (command, written at)
        # queue -> (clock, offset) of this consumer's last sync commit
        self.final: dict[int, tuple[int, int]] = {}
        self.answer: Callable[[cc.PullAnswer, memoryview], None] = lambda a, t: None

    # -- OffsetBroker (UPDATE_CONSUMER_OFFSET / QUERY_CONSUMER_OFFSET, another processor) --
    def query_offset(self, mq: MessageQueue) -> int:
        return self.broker.committed(mq.queue_id)

    def commit_offset(self, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        self.broker.commit(mq.queue_id, offset)
        if not oneway:
            self.final[mq.queue_id] = (self.broker.tick(), offset)

    # -- LOCK_BATCH_MQ / UNLOCK_BATCH_MQ (the broker's RebalanceLockManager) ---------------
    def lock(self, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
        keys = [(m.topic, m.broker_name, m.queue_id) for m in mqs]
        got = self.broker.locks.try_lock_batch(GROUP, keys, self.name, int(self.sim.now))
        return {MessageQueue(t, b, q) for t, b, q in got}

    def unlock(self, mqs: Iterable[MessageQueue]) -> None:
        keys = [(m.topic, m.broker_name, m.queue_id) for m in mqs]
        self.broker.locks.unlock_batch(GROUP, keys, self.name)

    # -- the admin a queue's first offset comes from --------------------------------------
    def max_offset(self, mq: MessageQueue) -> int:
        return self.broker.count[mq.queue_id]

    def search_offset(self, mq: MessageQueue, ts: int) -> int:
        return 0

    # -- the pull connection ----------------------------------------------------------------
    def receive(self, cmd: cc.PullCommand) -> None:
        """The pull actor wrote cmd: it reaches the pull processor in order."""
        self.inbound.append((cmd, self.broker.tick()))
        self.sim.at(self.sim.rng.uniform(0, 4), self.process_one)

    def process_one(self) -> None:
        if self.inbound:
            self.process(*self.inbound.popleft())

    def process_all(self) -> None:
        while self.inbound:
            self.process(*self.inbound.popleft())

    def process(self, cmd: cc.PullCommand, sent: int) -> None:
        broker = self.broker
        qid = cmd.queue_id
        if cmd.sys_flag & PullSysFlag.FLAG_COMMIT_OFFSET:
            at, final = self.final.get(qid, (0, 0))
            if at > sent and cmd.commit_offset != final:
                broker.violations.append(
                    f"{self.name} q{qid}: a pull sent before its final commit {final} "
                    f"stored {cmd.commit_offset} after it")
            broker.commit(qid, cmd.commit_offset)
        if cmd.offset < broker.count[qid]:
            self.found(cmd)
        elif cmd.sys_flag & PullSysFlag.FLAG_SUSPEND:
            broker.held.append((self, cmd))
            self.sim.at(HELD_MS, lambda: self._expire(cmd))
        else:
            self._reply(cmd, PullStatus.NO_NEW_MSG, cmd.offset, b"")

    def no_answer(self, cmd: cc.PullCommand) -> None:
        """The call's timeout (PULL_TIMEOUT_MS here; the command's 30 s on a real client)."""
        answer = cc.PullAnswer(cmd.rid, cc.NO_ANSWER, 0, 0, 0, 0)
        self.sim.at(PULL_TIMEOUT_MS, lambda: self.answer(answer, memoryview(b"timeout")))

    def _expire(self, cmd: cc.PullCommand) -> None:
        held = self.broker.held
        for i, (_, c) in enumerate(held):
            if c is cmd:
                del held[i]
                self._reply(cmd, PullStatus.NO_NEW_MSG, cmd.offset, b"")
                return

    def found(self, cmd: cc.PullCommand) -> None:
        qid = cmd.queue_id
        end = min(self.broker.count[qid], cmd.offset + cmd.max_nums)
        body = b"".join(record(qid, off) for off in range(cmd.offset, end))
        self._reply(cmd, PullStatus.FOUND, end, body)

    def _reply(self, cmd: cc.PullCommand, status: PullStatus, next_begin: int,
               body: bytes) -> None:  # fmt: skip
        answer = cc.PullAnswer(cmd.rid, status.value, next_begin, 0,
                               self.broker.count[cmd.queue_id], 0)  # fmt: skip
        self.sim.at(self.sim.rng.uniform(0, 4), lambda: self.answer(answer, memoryview(body)))


@functools.cache
def record(qid: int, off: int) -> bytes:
    """A stored message as the broker sends it in a pull body."""
    m = WireExt(topic=TOPIC, body=b"%d:%d" % (qid, off), flag=0,
                properties={"UNIQ_KEY": f"{qid:08d}{off:024d}"}, queue_id=qid,
                queue_offset=off, commit_log_offset=off * 100 + qid, sys_flag=0,
                born_timestamp=1, born_host=pack_host("10.0.0.1", 1), store_timestamp=2,
                store_host=pack_host("127.0.0.1", 10911), reconsume_times=0)  # fmt: skip
    return encode_message_ext(m)


class Routes:
    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this: bool) -> FindBrokerResult:  # fmt: skip
        return FindBrokerResult(ADDR, False)


class Services:
    """ConsumerServices of one consumer: its pull actor's channel and the RebalanceService's
    (on_revoked: where Revoked records go)."""

    def __init__(self, sim: Sim, conn: Conn) -> None:
        self.sim = sim
        self.conn = conn
        self.routes = Routes()
        self.rids = 0
        self.pulls: dict[int, Any] = {}
        self.cores: dict[str, Any] = {}
        self.released: list[MessageQueue] = []
        self.on_revoked: Callable[[list[MessageQueue]], None] = self.released.extend
        conn.answer = self.deliver

    def new_pull(self, owner: Any) -> int:
        self.rids += 1
        self.pulls[self.rids] = owner
        return self.rids

    def new_rid(self) -> int:
        self.rids += 1
        return self.rids

    def forget_pulls(self, owner: Any) -> None:
        self.pulls.clear()

    def send_pull(self, cmd: cc.PullCommand) -> None:
        owner = self.pulls[cmd.rid]  # the core's PullCallback
        req = owner.pending[cmd.rid]
        violations = self.conn.broker.violations
        out = [r for r in owner.pending.values() if r.pq is req.pq]  # answered ones are popped
        if len(out) != 1:
            violations.append(f"{self.conn.name}: {len(out)} pulls of one ProcessQueue out")
        if req.pq.dropped or req.pq.revoking:
            violations.append(f"{self.conn.name}: a pull sent for {req.mq} while it is let go")
        self.conn.receive(cmd)

    def after_wake(self, fn: Callable[[], None]) -> None:
        fn()

    def after_pulls_sent(self, fn: Callable[[], None]) -> None:
        fn()  # send_pull hands each command to the connection at once

    def settle(self, cmds: list[cc.PullCommand], timeout_s: float) -> bool:
        for cmd in cmds:
            self.conn.receive(cmd)
        self.conn.process_all()  # in order, up to and including cmds: their answers
        return True

    def deliver(self, answer: cc.PullAnswer, tail: memoryview) -> None:
        owner = self.pulls.pop(answer.rid, None)
        if owner is not None:
            owner.on_pull_result(answer, tail)

    def revoked(self, group: str, mqs: list[MessageQueue]) -> None:
        self.on_revoked(list(mqs))

    def remove_consumer(self, group: str, timeout_s: float = 10.0) -> None:
        pass

    def release(self) -> None:
        pass


class SimConsumer(DefaultMQPushConsumerImpl):
    """The push consumer's core with its consume service on the simulated workers; orderly:
    ConsumeMessageOrderlyService, its broker locks from the Conn's lock manager, and a
    violation when its handler runs on a queue while another consumer's handler does."""

    def __init__(self, sim: Sim, conn: Conn, handled: dict[int, set[int]], *,
                 orderly: bool = False, running: dict[int, str] | None = None) -> None:
        cfg = PushConsumerConfig(GROUP, "127.0.0.1:9876", pull_batch=8, orderly=orderly,
                                 consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                 pull_threshold_for_queue=20, consume_concurrently_max_span=30,
                                 revoke_drain_timeout_ms=10, suspend_current_queue_time_ms=20,
                                 pull_time_delay_ms_when_exception=30)  # fmt: skip
        super().__init__(cfg, self._handle)
        self.sim = sim
        self.conn = conn
        self.handled = handled
        self.running = running if running is not None else {}
        self.scheduler = SimScheduler(sim)  # type: ignore[assignment]
        self.services = Services(sim, conn)  # type: ignore[assignment]
        self.offset_store = RemoteBrokerOffsetStore(GROUP, conn)
        self.admin = conn  # type: ignore[assignment]
        self.consume_timestamp_ms = 0
        self.subscriptions[TOPIC] = SubscriptionData.build(TOPIC, "*")
        if orderly:
            orderly_service = ConsumeMessageOrderlyService(self, self._handle, workers=4)

            def busy(req: Any) -> bool:
                lock = orderly_service.queue_locks.get(req.mq)
                return lock is not None and lock.locked()

            orderly_service.executor = SimExecutor(  # type: ignore[assignment]
                sim, run_each, busy)
            self.consume = orderly_service
        else:
            service = ConsumeMessageConcurrentlyService(self, self._handle, workers=4)
            service.executor = SimExecutor(sim, service.run_batch)  # type: ignore[assignment]
            self.consume = service
        self.state = ServiceState.RUNNING

    @property
    def sim_services(self) -> Services:
        services = self.services
        assert isinstance(services, Services)
        return services

    def now_ms(self) -> int:
        """The consume services' clock (lock expiry): the simulation's."""
        return int(self.sim.now)

    def lock_one(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for mq alone, at the simulated broker."""
        ok = self.conn.lock([mq])
        pq = self.table.get(mq)
        if pq is not None and ok:
            pq.set_locked(True, self.now_ms())
        return bool(ok)

    def _handle(self, msgs: tuple[Any, ...]) -> ConsumeResult:
        qids = {m.queue_id for m in msgs}
        if self.cfg.orderly:
            for qid in qids:
                other = self.running.get(qid)
                if other is not None and other != self.conn.name:
                    self.conn.broker.overlaps.append(
                        f"orderly q{qid}: {self.conn.name} and {other} consume it at once")
                self.running[qid] = self.conn.name
        for m in msgs:
            self.handled[m.queue_id].add(m.queue_offset)
        sim = self.sim
        if sim.depth == 0 and sim.rng.random() < 0.3:  # other events run while it runs
            sim.depth += 1
            slow = sim.rng.random() < 0.1  # now and then a handler outlasts a revoke's drain
            for _ in range(sim.rng.randint(1, 6) if not slow else 60):
                if not sim.step():
                    break
            sim.depth -= 1
        if self.cfg.orderly:
            for qid in qids:
                if self.running.get(qid) == self.conn.name:
                    del self.running[qid]
        return ConsumeResult.SUCCESS


def assign(core: SimConsumer, mqs: Sequence[MessageQueue]) -> None:
    core.on_rebalance_record(cc.Assign(GROUP, tuple(cc.QueueLock(mq) for mq in mqs)))


def revoke(core: SimConsumer, mqs: Sequence[MessageQueue]) -> None:
    core.on_rebalance_record(cc.Revoke(GROUP, tuple(mqs)))


def lost(broker: Broker, handled: dict[int, set[int]]) -> dict[int, list[int]]:
    """Per queue, the offsets below its committed offset that no handler ever saw."""
    out = {}
    for qid in broker.count:
        missing = sorted(set(range(broker.committed(qid))) - handled[qid])
        if missing:
            out[qid] = missing[:10]
    return out
