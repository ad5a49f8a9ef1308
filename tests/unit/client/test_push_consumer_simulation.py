"""Deterministic simulation of one push consumer's core against a model of the broker
(tests/support/consumer_sim.py).

The real DefaultMQPushConsumerImpl (its pullMessage gates, PullCallback, revoke, reset and
close) and the real ConsumeMessageConcurrentlyService run on one thread under a seeded event
loop that stands in for everything around them: the consumer's scheduler thread, the consume
workers, the pull actor's connection (PullCommands reach the broker in the order they were
sent, each after its own random delay in the FIFO) and a broker that stores a pull's commit
offset when it first processes the pull, holds a pull with the suspend flag until a message
comes (or HELD_MS pass), and applies UPDATE_CONSUMER_OFFSET at once (another processor than the
pulls'). Each seed interleaves arriving messages, pull answers, handlers (which may see other
events run while they are "running"), rebalance revokes and re-assigns, offset resets to an
earlier offset, periodic oneway persists and a close.

Invariants, checked while running and at the end:
- at most one pull of a ProcessQueue is out, and none is sent for a queue being let go;
- no commit carried by a pull sent before a queue's final commit is stored after it (the
  final commit of a revoke, reset or close stands: the race "reset undone", "revoke commit
  overtaken");
- nothing is lost: every offset below the broker's committed offset was handled at least
  once (an answer for a queue being let go must not be cached nor move its offset: the race
  "revoke vs late FOUND").
"""

from __future__ import annotations

from typing import Any

import pytest

from actors.client.consumer.consumer_config import ServiceState
from actors.client.consumer.consumer_requests import reset_offsets
from protocol.bodies import MessageQueue
from tests.support.consumer_sim import (
    TOPIC,
    Broker,
    Conn,
    Services,
    Sim,
    SimConsumer,
    assign,
    lost,
    revoke,
)

QUEUES = [MessageQueue(TOPIC, "broker-a", q) for q in range(3)]
SEEDS = 1200
STEPS = 160


def run_seed(seed: int) -> tuple[Broker, dict[int, set[int]], SimConsumer]:
    sim = Sim(seed)
    broker = Broker(sim, len(QUEUES))
    handled: dict[int, set[int]] = {mq.queue_id: set() for mq in QUEUES}
    core = SimConsumer(sim, Conn(broker, "c1"), handled)
    services = core.sim_services
    rng = sim.rng
    for mq in QUEUES:
        broker.produce(mq.queue_id, rng.randint(0, 30))
    assign(core, QUEUES)
    for _ in range(STEPS):
        r = rng.random()
        if r < 0.25:
            broker.produce(rng.randrange(len(QUEUES)), rng.randint(1, 12))
        elif r < 0.33:
            held = [mq for mq, pq in core.table.items() if not pq.revoking]
            if held:
                revoke(core, [rng.choice(held)])
        elif r < 0.39:
            back = [mq for mq in services.released if mq not in core.table]
            services.released.clear()
            if back:
                assign(core, back)
        elif r < 0.42:
            mq = rng.choice(QUEUES)
            if mq in core.table and not core.table[mq].revoking:
                # an earlier offset (what the user asked for is re-consumed, not lost)
                to = rng.randint(0, max(0, broker.committed(mq.queue_id)))
                sim.at(rng.uniform(0, 2), lambda mq=mq, to=to: reset_offsets(core, TOPIC, {mq: to}))
                sim.at(rng.uniform(3, 10), lambda mq=mq: assign(core, [mq]))
        elif r < 0.45:
            sim.at(0, lambda: core.persist(list(core.table), sync=False))
        for _ in range(rng.randint(1, 8)):
            if not sim.step():
                break
    for _ in range(200):  # let the last messages be consumed (bounded)
        if not sim.step():
            break
    core.shutdown(timeout_s=1.0)
    for _ in range(100_000):  # what was still out is answered, and ignored
        if not sim.step():
            break
    services.conn.process_all()
    return broker, handled, core


def check(seed: int) -> None:
    broker, handled, core = run_seed(seed)
    assert not broker.violations, f"seed {seed}: {broker.violations[:3]}"
    missing = lost(broker, handled)
    assert not missing, f"seed {seed}: committed past offsets never handled: {missing}"
    assert core.state is ServiceState.SHUTDOWN_ALREADY


@pytest.mark.parametrize("block", range(3))
def test_push_consumer_simulation(block: int) -> None:
    """SEEDS seeded interleavings, in three blocks; every invariant holds in each."""
    per = SEEDS // 3
    for seed in range(block * per, (block + 1) * per):
        check(seed)


def test_the_simulation_catches_an_overtaken_final_commit(monkeypatch: Any) -> None:
    """Without settling, a pull sent before a revoke's or a close's final commit stores its
    older offset after it in some seeds: the invariant is not vacuous."""
    monkeypatch.setattr(Services, "settle", lambda self, cmds, timeout_s: True)
    caught = 0
    for seed in range(300):
        broker, _, _ = run_seed(seed)
        caught += bool(broker.violations)
    assert caught > 0
