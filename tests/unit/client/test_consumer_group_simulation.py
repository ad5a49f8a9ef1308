"""Deterministic simulation of a consumer group: several push consumer cores, each with the
real RebalanceImpl deciding what it holds, against one broker model
(tests/support/consumer_sim.py).

The broker side is the broker's own cores: ConsumerOffsetManager (flushed now and then),
ConsumerManager (heartbeats register members; a close unregisters, a kill -9 closes the
connection) and RebalanceLockManager; the broker restarts now and then (offsets back to the
last flush, members and locks forgotten until the next heartbeats, pulls on their way lost and
timed out by the client).

Each consumer's rebalance runs on its own schedule, as each client's RebalanceService does: on
a membership change every member rebalances after its own delay, so for a while a queue can be
held by its new owner while its old owner still drains it (RocketMQ's window for duplicates,
never for loss). Seeds interleave arriving messages, joins, clean leaves (close: drain and
commit), crashes (kill -9: nothing committed), periodic rebalance rounds and oneway persists.

Orderly groups as well: each queue taken only once the broker (the real RebalanceLockManager)
granted its lock, locks renewed every round and let go on release, a crashed member's lapsing.

Invariants: no pull a consumer sent before its own final commit of a queue stores its offset
after that commit; at most one pull of a ProcessQueue out and none for a queue being let go;
nothing committed that no handler saw; and once the group is quiet, every queue held by exactly
one live member; orderly, never two consumers in a handler of one queue at once (unless the
broker restarted: its locks live in memory, and until the old owner's next lockAll finds its
lock gone, a new owner may consume beside it; RocketMQ 4.9's window too).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import pytest

from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.allocate import AllocateMessageQueueAveragely
from actors.client.consumer.rebalance import (
    Action,
    Assign,
    Lock,
    LockState,
    RebalanceImpl,
    Revoke,
    SubscriptionChanged,
    Unlock,
)
from protocol.bodies import MessageModel, MessageQueue, SubscriptionData
from tests.support.consumer_sim import GROUP, TOPIC, Broker, Conn, Sim, SimConsumer, lost

QUEUES = [MessageQueue(TOPIC, "broker-a", q) for q in range(4)]
SEEDS = 1000
ORDERLY_SEEDS = 600
STEPS = 150
ROUND_MS = 50.0  # the periodic rebalance (20 s on a real client)
HEARTBEAT_MS = 40.0  # heartbeatBrokerInterval (30 s)
FLUSH_MS = 30.0  # the broker's consumer offset flush (flushConsumerOffsetInterval, 5 s)


class Member:
    """One client of the group: its consumer core and its RebalanceService's core."""

    def __init__(self, group_sim: GroupSim, cid: str) -> None:
        self.g = group_sim
        self.cid = cid
        self.conn = Conn(group_sim.broker, cid)
        self.core = SimConsumer(group_sim.sim, self.conn, group_sim.handled,
                                orderly=group_sim.orderly, running=group_sim.running)
        self.impl = RebalanceImpl(GROUP, cid, MessageModel.CLUSTERING,
                                  AllocateMessageQueueAveragely(), orderly=group_sim.orderly,
                                  subscriptions={TOPIC: SubscriptionData.build(TOPIC, "*")})
        self.impl.set_topic_queues(TOPIC, QUEUES)
        self.core.sim_services.on_revoked = self.on_revoked
        self.alive = True
        self.heartbeat()

    def heartbeat(self) -> None:
        """sendHeartbeatToAllBroker, every HEARTBEAT_MS; a new member (or one the broker forgot
        in a restart) makes the broker notify the group."""
        if not self.alive:
            return
        if self.g.broker.heartbeat(self.conn):
            self.g.notify()
        self.g.sim.at(HEARTBEAT_MS, self.heartbeat)

    def round(self) -> None:
        """doRebalance with the broker's consumer list as it is now."""
        if self.alive:
            self.apply(self.impl.rebalance_topic(TOPIC, self.g.cids(), int(self.g.sim.now)))

    def on_revoked(self, mqs: list[MessageQueue]) -> None:
        """The core released queues (REVOKED); a queue allocated again meanwhile is retaken
        at the next round, which the rebalance asks for soon."""
        for mq in mqs:
            self.apply(self.impl.on_revoked(mq))
        if self.impl.retry_soon and self.alive:
            self.impl.retry_soon = False
            self.g.sim.at(5.0, self.round)

    def apply(self, actions: Iterable[Action]) -> None:
        """The RebalanceService actor's _apply: one Revoke, one Assign and one LockStates
        record; LOCK_BATCH_MQ / UNLOCK_BATCH_MQ at the broker (their answers come back)."""
        if not self.alive:
            return
        actions = list(actions)
        assigns = [cc.QueueLock(a.mq, a.locked, a.lock_ms) for a in actions
                   if isinstance(a, Assign)]  # fmt: skip
        states = [cc.QueueLock(a.mq, a.locked, a.lock_ms) for a in actions
                  if isinstance(a, LockState)]  # fmt: skip
        revokes = tuple(a.mq for a in actions if isinstance(a, Revoke))
        if revokes:
            self.core.on_rebalance_record(cc.Revoke(GROUP, revokes))
        if assigns:
            self.core.on_rebalance_record(cc.Assign(GROUP, tuple(assigns)))
        if states:
            self.core.on_rebalance_record(cc.LockStates(GROUP, tuple(states)))
        for a in actions:
            if isinstance(a, Lock):
                asked = sorted(a.mqs)
                self.g.sim.at(self.g.sim.rng.uniform(0, 3), lambda asked=asked: self.locked(
                    asked, self.conn.lock(asked)))
            elif isinstance(a, Unlock):
                self.conn.unlock(a.mqs)
            elif isinstance(a, SubscriptionChanged):
                self.core.on_rebalance_record(
                    cc.QueuesChanged(GROUP, a.topic, tuple(a.mq_all), tuple(a.mq_divided)))
        if self.impl.retry_soon:
            self.impl.retry_soon = False
            self.g.sim.at(5.0, self.round)

    def locked(self, asked: list[MessageQueue], granted: set[MessageQueue]) -> None:
        """A LOCK_BATCH_MQ answer."""
        if self.alive:
            self.apply(self.impl.on_lock_result(asked, granted, int(self.g.sim.now)))

    def holds(self) -> set[MessageQueue]:
        return {mq for mq, pq in self.core.table.items() if not pq.revoking and not pq.dropped}


class GroupSim:
    def __init__(self, seed: int, orderly: bool) -> None:
        self.orderly = orderly
        self.running: dict[int, str] = {}  # orderly: queue -> the consumer in its handler
        self.sim = Sim(seed)
        self.broker = Broker(self.sim, len(QUEUES))
        self.handled: dict[int, set[int]] = {mq.queue_id: set() for mq in QUEUES}
        self.members: list[Member] = []
        self.next_id = 1

    def cids(self) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the broker's ConsumerManager, fed by heartbeats."""
        return self.broker.cids()

    def notify(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED: each live member rebalances after its own delay."""
        for m in self.members:
            if m.alive:
                self.sim.at(self.sim.rng.uniform(0, 20), m.round)

    def join(self) -> None:
        m = Member(self, f"10.0.0.{self.next_id}@{self.next_id}")
        self.next_id += 1
        self.members.append(m)
        self.notify()

    def leave(self, m: Member) -> None:
        """close(): drain, commit the final offsets, UNREGISTER_CLIENT."""
        m.core.shutdown(timeout_s=1.0)
        m.alive = False
        if self.broker.consumers.unregister(GROUP, m.conn.conn_id, m.cid):
            self.notify()

    def crash(self, m: Member) -> None:
        """kill -9: nothing more is committed; its connection closes at the broker."""
        m.alive = False
        m.core.state = m.core.state.__class__.SHUTDOWN_ALREADY
        m.core.sim_services.forget_pulls(m.core.pulling)
        if self.broker.consumers.on_connection_closed(m.conn.conn_id):
            self.notify()

    def flush(self) -> None:
        self.broker.flush()
        if any(m.alive for m in self.members):
            self.sim.at(FLUSH_MS, self.flush)

    def periodic(self) -> None:
        live = [m for m in self.members if m.alive]
        for m in live:
            m.round()
            m.apply(m.impl.lock_all())  # lockMQPeriodically (orderly)
        if live:  # the last one gone, nobody rebalances
            self.sim.at(ROUND_MS, self.periodic)


def run_seed(seed: int, orderly: bool = False) -> GroupSim:
    g = GroupSim(seed, orderly)
    sim, rng = g.sim, g.sim.rng
    for mq in QUEUES:
        g.broker.produce(mq.queue_id, rng.randint(0, 20))
    for _ in range(rng.randint(1, 3)):
        g.join()
    sim.at(ROUND_MS, g.periodic)
    sim.at(FLUSH_MS, g.flush)
    restarting = rng.random() < 0.3  # a third of the seeds restart the broker now and then
    for _ in range(STEPS):
        r = rng.random()
        live = [m for m in g.members if m.alive]
        if r < 0.3:
            g.broker.produce(rng.randrange(len(QUEUES)), rng.randint(1, 10))
        elif r < 0.35 and len(live) < 4:
            g.join()
        elif r < 0.39 and len(live) > 1:
            g.leave(rng.choice(live))
        elif r < 0.41 and len(live) > 1:
            g.crash(rng.choice(live))
        elif r < 0.45 and live:
            m = rng.choice(live)
            sim.at(0, lambda m=m: m.core.persist(list(m.core.table), sync=False))
        elif r < 0.47 and restarting:
            g.broker.restart()
        for _ in range(rng.randint(1, 8)):
            if not sim.step():
                break
    for _ in range(1200):  # quiet: the rounds settle the allocation and the backlog drains
        sim.step()
    return g


def check(seed: int, orderly: bool = False) -> None:
    g = run_seed(seed, orderly)
    broker = g.broker
    assert not broker.violations, f"seed {seed}: {broker.violations[:3]}"
    assert not broker.overlaps or broker.restarts, f"seed {seed}: {broker.overlaps[:3]}"
    live = [m for m in g.members if m.alive]
    owners = {mq: [m.cid for m in live if mq in m.holds()] for mq in QUEUES}
    assert all(len(o) == 1 for o in owners.values()), f"seed {seed}: owners {owners}"
    for m in live:
        g.leave(m)
    for _ in range(100_000):
        if not g.sim.step():
            break
    for m in g.members:
        m.conn.process_all()
    assert not broker.violations, f"seed {seed}: {broker.violations[:3]}"
    assert not broker.overlaps or broker.restarts, f"seed {seed}: {broker.overlaps[:3]}"
    missing = lost(broker, g.handled)
    assert not missing, f"seed {seed}: committed past offsets never handled: {missing}"


@pytest.fixture(autouse=True)
def _quiet_allocation_errors() -> Iterator[None]:
    """A group the restarted broker has forgotten until the next heartbeats has no consumer
    list: each round logs that its allocation failed (as Java does)."""
    rebalance_log = logging.getLogger("actors.client.consumer.rebalance")
    level = rebalance_log.level
    rebalance_log.setLevel(logging.CRITICAL)
    yield
    rebalance_log.setLevel(level)


@pytest.mark.parametrize("block", range(2))
def test_consumer_group_simulation(block: int) -> None:
    per = SEEDS // 2
    for seed in range(block * per, (block + 1) * per):
        check(seed)


@pytest.mark.parametrize("block", range(2))
def test_orderly_consumer_group_simulation(block: int) -> None:
    """The same with orderly consumers: queues taken only under the broker's lock (the real
    RebalanceLockManager), renewed every round; and never two consumers in a handler of one
    queue at once."""
    per = ORDERLY_SEEDS // 2
    for seed in range(block * per, (block + 1) * per):
        check(seed, orderly=True)
