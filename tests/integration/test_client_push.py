"""PushConsumer against a real actormq cluster: clustering with rebalances, broadcasting,
orderly, retries and the DLQ, delay levels, filters, flow control, clean close.

One cluster (name server + broker, started as `actormq up` starts them) serves the module;
each test uses its own topic and group. Rebalance intervals are shortened (FAST) and the
rebalance is also triggered by the broker's NOTIFY_CONSUMER_IDS_CHANGED, as in Java.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.client import Message, Producer
from actors.client.consumer import AsyncPushConsumer, ConsumeContext, ConsumeResult, PushConsumer
from actors.client.records import MessageExt
from tests.integration.client_helpers import (
    Target,
    read_topic,
    start_actormq,
    start_reference,
    stop_actormq,
)
from tests.integration.consumer_helpers import (
    FAST,
    Recorder,
    create_topic,
    disjoint_cover,
    dup_count,
    produce,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["actormq", "reference"])
def cluster(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """actormq (started as `actormq up` starts it) or the reference RocketMQ 4.9.8."""
    base = Path(tmp_path_factory.mktemp(f"push-{request.param}"))
    if request.param == "actormq":
        target = start_actormq(base, enablePropertyFilter="true")
        try:
            yield target
        finally:
            assert stop_actormq(target) == []
    else:
        request.getfixturevalue("reference_build")
        target = start_reference(base, enablePropertyFilter="true")
        try:
            yield target
        finally:
            target.handle.stop()


def consumer(target: Target, group: str, handler: Any, **kw: Any) -> PushConsumer:
    kw.setdefault("consume_from", "first")
    return PushConsumer(group, namesrv=target.namesrv, handler=handler, **{**FAST, **kw})


def test_clustering_three_consumers_then_join_and_leave(cluster: Target) -> None:
    topic, group, n = "PushCluster", "push_cluster_cg", 3000
    create_topic(cluster, topic, 8)
    recs = [Recorder(f"c{i}") for i in range(4)]
    cons = [consumer(cluster, group, recs[i]) for i in range(3)]
    sender_done = threading.Event()

    def send() -> None:
        with Producer("push_cluster_pg", namesrv=cluster.namesrv) as p:
            for i in range(n):
                p.send(Message(topic, b"%d" % i))
                if i % 100 == 99:
                    time.sleep(0.05)  # ~1,500 msgs/s: the rebalances happen mid-stream
        sender_done.set()

    for c in cons:
        c.start().subscribe(topic)
    try:
        def sizes() -> list[int]:
            return sorted(len({q for q in c.assignment() if q.topic == topic}) for c in cons)

        assert wait_for(lambda: disjoint_cover([c.assignment() for c in cons], topic, 8)
                        and sizes() == [2, 3, 3], 30), sizes()
        t = threading.Thread(target=send, daemon=True)
        t.start()
        wait_for(lambda: sum(len(r.bodies()) for r in recs) > n // 4, 30)
        cons.append(consumer(cluster, group, recs[3]).start())
        cons[3].subscribe(topic)
        assert wait_for(lambda: disjoint_cover([c.assignment() for c in cons], topic, 8)
                        and sizes() == [2, 2, 2, 2], 30), sizes()
        wait_for(lambda: sum(len(r.bodies()) for r in recs) > n // 2, 30)
        assert cons[1].close()  # a clean leave: drained and committed
        rest = [cons[0], cons[2], cons[3]]
        assert wait_for(lambda: disjoint_cover([c.assignment() for c in rest], topic, 8)
                        and sorted(len({q for q in c.assignment() if q.topic == topic})
                                   for c in rest) == [2, 3, 3], 30)
        assert sender_done.wait(60)
        want = {b"%d" % i for i in range(n)}
        got = wait_for(lambda: want <= {b for r in recs for b in r.bodies()} or None, 60)
        assert got, f"missing {len(want - {b for r in recs for b in r.bodies()})} messages"
        allb = [b for r in recs for b in r.bodies()]
        dups = dup_count(allb)
        print(f"clustering: {len(allb)} deliveries of {n} messages, {dups} duplicates "
              f"(around the two rebalances)")
        assert dups < n // 5
    finally:
        for c in cons:
            c.close()


def test_pulls_in_rocketmq_binary_headers(cluster: Target) -> None:
    """serialize_type=1: every pull is encoded whole in ROCKETMQ headers (no JSON template),
    and the answers, whichever type the broker writes them in, are read the same."""
    topic, group, n = "PushBinary", "push_binary_cg", 200
    create_topic(cluster, topic, 4)
    assert produce(cluster.namesrv, topic, (b"%d" % i for i in range(n))) == n
    rec = Recorder("bin")
    with consumer(cluster, group, rec, serialize_type=1) as c:
        c.subscribe(topic)
        assert wait_for(lambda: len(set(rec.bodies())) == n or None, 30), len(rec.bodies())
    assert set(rec.bodies()) == {b"%d" % i for i in range(n)}


def test_broadcasting_every_consumer_gets_everything(cluster: Target, tmp_path: Path) -> None:
    topic, group = "PushBroadcast", "push_bcast_cg"
    create_topic(cluster, topic, 4)
    recs = [Recorder("a"), Recorder("b")]
    cons = [consumer(cluster, group, r, model="broadcasting", offset_store_dir=str(tmp_path),
                     instance_name=f"bc{i}") for i, r in enumerate(recs)]
    try:
        for c in cons:
            c.start().subscribe(topic)
        assert wait_for(lambda: all(len({q for q in c.assignment() if q.topic == topic}) == 4
                                    for c in cons), 30)
        produce(cluster.namesrv, topic, (b"%d" % i for i in range(100)))
        want = {b"%d" % i for i in range(100)}
        for r in recs:
            assert wait_for(lambda r=r: set(r.bodies()) == want, 30)
    finally:
        for c in cons:
            c.close()
    assert list(tmp_path.glob("*/push_bcast_cg/offsets.json"))  # offsets kept locally


def test_broadcasting_offsets_outlive_the_process(cluster: Target, tmp_path: Path) -> None:
    """A broadcasting consumer without an instance name keeps its offsets under ip@DEFAULT, as
    Java's does (only clustering consumers take the pid as instance name): a restarted
    process (another pid) finds them. Under ip@<pid> it found none and began again from
    consume_from (with "last": everything sent while it was down skipped)."""
    topic, group = "PushBcastKeep", "push_bcast_keep_cg"
    create_topic(cluster, topic, 2)
    rec = Recorder("k")
    c = consumer(cluster, group, rec, model="broadcasting", offset_store_dir=str(tmp_path))
    try:
        c.start().subscribe(topic)
        produce(cluster.namesrv, topic, (b"%d" % i for i in range(10)))
        assert wait_for(lambda: len(rec.bodies()) == 10, 30)
    finally:
        c.close()
    files = [p.relative_to(tmp_path) for p in tmp_path.glob("*/*/offsets.json")]
    assert [f.parts[1:] for f in files] == [(group, "offsets.json")]
    assert files[0].parts[0].endswith("@DEFAULT")


def test_orderly_one_key_in_order_across_restart(cluster: Target) -> None:
    topic, group, n = "PushOrderly", "push_orderly_cg", 300
    create_topic(cluster, topic, 4)
    with Producer("push_orderly_pg", namesrv=cluster.namesrv) as p:
        for i in range(n // 2):
            p.send_orderly(Message(topic, b"%d" % i), "order-42")
    rec = Recorder("o", sleep_s=0.001)
    c = consumer(cluster, group, rec, orderly=True).start()
    c.subscribe(topic)
    try:
        assert wait_for(lambda: len(rec.bodies()) >= n // 4, 30)
    finally:
        c.close()
    first = rec.bodies()
    rec2 = Recorder("o2")
    c2 = consumer(cluster, group, rec2, orderly=True).start()
    c2.subscribe(topic)
    try:
        with Producer("push_orderly_pg", namesrv=cluster.namesrv) as p:
            for i in range(n // 2, n):
                p.send_orderly(Message(topic, b"%d" % i), "order-42")
        assert wait_for(lambda: (first + rec2.bodies())[-1:] == [b"%d" % (n - 1)], 30)
    finally:
        c2.close()
    seq = [int(b) for b in first + rec2.bodies()]
    assert seq == sorted(seq) and set(seq) == set(range(n))  # strictly in order, no duplicate
    qs = {m.queue.queue_id for _, _, m in rec.deliveries + rec2.deliveries}
    assert len(qs) == 1


def test_retry_three_deliveries_then_dlq(cluster: Target) -> None:
    topic, group = "PushRetry", "push_retry_cg"
    create_topic(cluster, topic, 2)
    seen: list[tuple[bytes, int, str]] = []
    lock = threading.Lock()

    def handle(msgs: tuple[MessageExt, ...], ctx: ConsumeContext) -> ConsumeResult:
        ctx.delay_level = 1  # 1 s instead of 10 s, 30 s
        with lock:
            for m in msgs:
                seen.append((m.body, m.reconsume_times, m.topic))
            if msgs[0].body == b"retry" and msgs[0].reconsume_times < 2:
                return ConsumeResult.RECONSUME_LATER
            if msgs[0].body == b"dlq":
                raise RuntimeError("always fails")  # an exception counts as later
        return ConsumeResult.SUCCESS

    c = consumer(cluster, group, handle, max_reconsume_times=2).start()
    c.subscribe(topic)
    try:
        wait_for(lambda: c.assignment(), 30)
        produce(cluster.namesrv, topic, [b"retry", b"dlq"])
        assert wait_for(lambda: [(b, r) for b, r, _ in seen if b == b"retry"] ==
                        [(b"retry", 0), (b"retry", 1), (b"retry", 2)], 30), seen
        assert all(t == topic for b, _, t in seen)  # redeliveries show the real topic
        assert wait_for(lambda: len([1 for b, _, _ in seen if b == b"dlq"]) == 3, 30), seen
        dlq = wait_for(lambda: [m for m in _dlq(cluster, group) if m.body == b"dlq"], 20)
        assert dlq, "the message never reached %DLQ%"
        time.sleep(1.5)  # nothing more arrives: at most 3 deliveries of the DLQ'd message
        assert len([1 for b, _, _ in seen if b == b"dlq"]) == 3
    finally:
        c.close()


def test_new_group_first_retry_within_seconds(cluster: Target) -> None:
    """A brand-new group with Java's 20 s rebalance interval: the first RECONSUME_LATER (delay
    level 1 = 1 s) comes back within seconds, as on RocketMQ 4.9.8, because the broker notifies
    the group only once its new %RETRY% topic is at the name server, so the rebalance that
    notice starts assigns the retry queue. Notified before, the consumer held its retry queue
    only at its next rebalance and the retry came back ~20 s later (issue #20 item 7)."""
    topic, group = "PushFirstRetry", "push_first_retry_cg"
    create_topic(cluster, topic, 2)
    times: list[tuple[int, float]] = []

    def handle(msgs: tuple[MessageExt, ...], ctx: ConsumeContext) -> ConsumeResult:
        ctx.delay_level = 1
        times.append((msgs[0].reconsume_times, time.monotonic()))
        return ConsumeResult.RECONSUME_LATER if msgs[0].reconsume_times == 0 \
            else ConsumeResult.SUCCESS

    c = consumer(cluster, group, handle, rebalance_interval_ms=20_000.0)
    c.subscribe(topic)
    c.start()
    try:
        assert wait_for(lambda: any(q.topic == topic for q in c.assignment()), 30)
        produce(cluster.namesrv, topic, [b"again"])
        assert wait_for(lambda: len(times) >= 2, 30), times
        (first, t_first), (second, t_second) = times[:2]
        assert (first, second) == (0, 1)
        assert t_second - t_first < 8.0, f"retried after {t_second - t_first:.1f} s"
    finally:
        c.close()


def test_a_route_that_appears_after_a_round_is_taken_within_seconds(cluster: Target) -> None:
    """A subscribed topic the name server has no route for when a round runs (as a group's
    %RETRY% topic that RocketMQ 4.9.8 registers oneway, racing the notice that starts the
    round): the consumer asks again after 1, 2, 4, ... s instead of at its next 20 s round."""
    known, late, group = "PushRouted", "PushRoutedLate", "push_late_route_cg"
    create_topic(cluster, known, 1)
    got = threading.Event()

    def handle(msgs: tuple[MessageExt, ...]) -> ConsumeResult:
        if any(m.topic == late for m in msgs):
            got.set()
        return ConsumeResult.SUCCESS

    c = consumer(cluster, group, handle, rebalance_interval_ms=20_000.0)
    c.subscribe(known)
    c.subscribe(late)
    c.start()
    try:
        # the round that assigned `known` found no route for `late`
        assert wait_for(lambda: any(q.topic == known for q in c.assignment()), 30)
        created = time.monotonic()
        create_topic(cluster, late, 1)
        # sent with the raw wire client: a Producer of this process would share the consumer's
        # client instance, whose route fetch for the send would tell the consumer at once
        from deploy.wire import BlockingClient
        from tests.integration.e2e_helpers import RPC_TIMEOUT_S, msg_props, send_cmd

        host, port = cluster.broker_addr().split(":")
        with BlockingClient((host, int(port))) as w:
            r = w.invoke(send_cmd(late, b"late", msg_props()), RPC_TIMEOUT_S)
            assert r.code == 0, (r.code, r.remark)
        assert got.wait(30), "never consumed"
        took = time.monotonic() - created
        assert took < 8.0, f"the late topic was taken {took:.1f} s after it was created"
    finally:
        c.close()


def _dlq(target: Target, group: str) -> list[Any]:
    from tests.integration.client_helpers import route_of

    return read_topic(target, f"%DLQ%{group}") if route_of(target, f"%DLQ%{group}") else []


def test_delay_level_and_filters(cluster: Target) -> None:
    topic = "PushFilter"
    create_topic(cluster, topic, 2)
    tag_rec, sql_rec = Recorder("tag"), Recorder("sql")
    tc = consumer(cluster, "push_tag_cg", tag_rec).start()
    tc.subscribe(topic, "TagA || TagB")
    sc = consumer(cluster, "push_sql_cg", sql_rec).start()
    sc.subscribe(topic, "a > 5 AND color = 'red'")
    try:
        wait_for(lambda: tc.assignment() and sc.assignment(), 30)
        with Producer("push_filter_pg", namesrv=cluster.namesrv) as p:
            for i, tag in enumerate(["TagA", "TagB", "TagC", "TagA"]):
                p.send(Message(topic, b"t%d" % i, tags=tag))
            for i in range(10):
                p.send(Message(topic, b"s%d" % i, tags="TagC",
                               properties={"a": str(i), "color": "red" if i % 2 else "blue"}))
            t_sent = time.time()
            p.send(Message(topic, b"delayed", tags="TagB", delay_level=1))  # 1 s
        assert wait_for(lambda: b"delayed" in tag_rec.bodies(), 20)
        got = {b: m for _, b, m in tag_rec.deliveries}
        assert set(got) == {b"t0", b"t1", b"t3", b"delayed"}
        assert got[b"delayed"].store_timestamp - int(t_sent * 1000) >= 900
        assert wait_for(lambda: set(sql_rec.bodies()) == {b"s7", b"s9"}, 20), sql_rec.bodies()
    finally:
        tc.close()
        sc.close()


def test_flow_control_keeps_slow_consumer_cache_bounded(cluster: Target) -> None:
    topic, group = "PushFlow", "push_flow_cg"
    create_topic(cluster, topic, 2)
    produce(cluster.namesrv, topic, (b"x" * 512 for _ in range(1000)))
    rec = Recorder("slow", sleep_s=0.002)
    c = consumer(cluster, group, rec, workers=1, pull_threshold_for_queue=50,
                 pull_batch=16).start()
    c.subscribe(topic)
    peak = 0
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(rec.bodies()) < 600:
            for q in c.stats()["queues"].values():
                peak = max(peak, q["cached_msgs"])
            time.sleep(0.01)
        assert c.stats()["flow_controlled"] > 0
    finally:
        c.close()
    assert 0 < peak <= 50 + 16  # the gate stops pulling past the threshold (+ one pull)


def test_clean_close_after_load_gives_no_duplicate(cluster: Target) -> None:
    topic, group, n = "PushClose", "push_close_cg", 2000
    create_topic(cluster, topic, 8)
    produce(cluster.namesrv, topic, (b"%d" % i for i in range(n)))
    first = Recorder("first", sleep_s=0.0005)
    events: list[tuple[str, frozenset[Any]]] = []

    class Listener:
        def on_assigned(self, queues: set[Any]) -> None:
            events.append(("assigned", frozenset(q for q in queues if q.topic == topic)))

        def on_revoked(self, queues: set[Any]) -> None:
            events.append(("revoked", frozenset(q for q in queues if q.topic == topic)))

    c = consumer(cluster, group, first, workers=8, listener=Listener()).start()
    c.subscribe(topic)
    assert wait_for(lambda: len(first.bodies()) > n // 3, 30)
    assert c.close(timeout=10)  # under load: handlers were running
    assigned = frozenset().union(*(q for kind, q in events if kind == "assigned"))
    assert len(assigned) == 8 and events[-1] == ("revoked", assigned)  # after the drain
    done = set(first.bodies())
    assert len(done) < n
    second = Recorder("second")
    c2 = consumer(cluster, group, second).start()
    c2.subscribe(topic)
    try:
        want = {b"%d" % i for i in range(n)}
        assert wait_for(lambda: done | set(second.bodies()) >= want, 30)
    finally:
        c2.close()
    assert dup_count(first.bodies() + second.bodies()) == 0


def test_async_push_consumer(cluster: Target) -> None:
    topic, group = "PushAsync", "push_async_cg"
    create_topic(cluster, topic, 4)
    got: list[bytes] = []

    async def main() -> None:
        loop_thread = threading.get_ident()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        async def handle(msgs: tuple[MessageExt, ...]) -> ConsumeResult:
            assert threading.get_ident() == loop_thread  # runs on the caller's loop
            await asyncio.sleep(0)
            got.extend(m.body for m in msgs)
            return ConsumeResult.SUCCESS

        tick_task = asyncio.create_task(ticker())
        c = AsyncPushConsumer(group, namesrv=cluster.namesrv, handler=handle,
                              consume_from="first", **FAST)
        before = ticks
        await c.start()  # creates actors, registers: the loop keeps ticking meanwhile
        assert ticks > before
        c.subscribe(topic)
        await asyncio.to_thread(produce, cluster.namesrv, topic, [b"%d" % i for i in range(50)])
        deadline = time.monotonic() + 20
        while len(got) < 50 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        before = ticks
        assert await c.close()
        assert ticks > before
        tick_task.cancel()

    asyncio.run(main())
    assert sorted(got) == sorted(b"%d" % i for i in range(50))


CLIENTS = Path(__file__).resolve().parents[1] / "clients"


def _events(path: Path) -> list[dict[str, Any]]:
    import json

    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # the line a kill -9 cut short
    return out


def test_kill_9_of_a_consumer_process_loses_nothing(cluster: Target, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from deploy import procinfo
    from tests.integration.conftest import kill_pids, wait_gone

    topic, group, n = "PushKill", "push_kill_cg", 1500
    create_topic(cluster, topic, 4)
    produce(cluster.namesrv, topic, (b"%d" % i for i in range(n)))
    out = tmp_path / "victim.out"
    with open(out, "wb") as f, open(tmp_path / "victim.err", "wb") as err:
        proc = subprocess.Popen([sys.executable, str(CLIENTS / "py_consumer.py"), cluster.namesrv,
                                 topic, group, "2"], stdout=f, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: len([e for e in _events(out) if e["event"] == "got"]) > n // 3,
                        30), (tmp_path / "victim.err").read_text()[-2000:]
        session = procinfo.pids_in_session(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # the user's process dies mid-handler
        proc.wait(10)
        # its client actor system notices the channel closing without BYE and goes too
        left = wait_gone([p for p in session if p != proc.pid], 20.0)
        assert left == [], f"client processes outlived the kill: {left}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        kill_pids(procinfo.pids_in_session(proc.pid))
    first = [e["body"].encode() for e in _events(out) if e["event"] == "got"]
    rec = Recorder("after")
    c = consumer(cluster, group, rec).start()
    c.subscribe(topic)
    try:
        want = {b"%d" % i for i in range(n)}
        assert wait_for(lambda: set(first) | set(rec.bodies()) >= want, 60), \
            len(want - set(first) - set(rec.bodies()))
    finally:
        c.close()
    dups = dup_count(first + rec.bodies())
    print(f"kill -9: {len(first)} consumed before the kill, {len(rec.bodies())} after, "
          f"{dups} duplicates, nothing lost")


def test_consumer_benchmark_cli(cluster: Target, tmp_path: Path) -> None:
    import sys

    from tests.integration.e2e_helpers import run_driver

    topic = "PushBenchCli"
    create_topic(cluster, topic, 4)
    produce(cluster.namesrv, topic, (b"x" * 100 for _ in range(300)))
    code, _, err = run_driver([sys.executable, "-m", "deploy", "consumer", "-n", cluster.namesrv,
                               "-t", topic, "-g", "push_bench_cli_cg", "--from", "first",
                               "--seconds", "2.5"], tmp_path / "bench", 60,
                              cwd=Path(__file__).resolve().parents[2])
    text = (tmp_path / "bench.out").read_text()
    assert code == 0, err
    assert "Consume TPS:" in text and "AVG(B2C) RT(ms):" in text
    assert "Total: consumed 300 | failed 0" in text, text[-1500:]
    code, _, err = run_driver([sys.executable, "-m", "deploy", "consumer", "-n", "nonsense"],
                              tmp_path / "bad", 30, cwd=Path(__file__).resolve().parents[2])
    assert code == 2 and "bad name server address" in err


def test_pull_answers_are_read_by_the_users_process_on_the_shared_connection(
        cluster: Target) -> None:  # fmt: skip
    """Over plain TCP the pull actor makes the broker connection and hands it to the user's
    process, which writes the pulls and reads their answers itself: every body arrives (one
    answer of 3 MiB, far longer than the read buffer, among them), the user's process holds
    the broker's connection and no pull waits for one, and no ring is mapped (rings carry the
    answers only over TLS)."""
    topic, group = "PushShared", "push_shared_cg"
    create_topic(cluster, topic, 2)
    bodies = [b"conn-%06d-" % i + bytes([65 + i % 26]) * 1000 for i in range(300)]
    big = os.urandom(3 * 1024 * 1024)
    produce(cluster.namesrv, topic, [*bodies, big])
    rec = Recorder()
    c = consumer(cluster, group, rec)
    c.start().subscribe(topic)
    try:
        got = wait_for(lambda: len(rec.bodies()) >= len(bodies) + 1 and rec.bodies(), 60)
        assert sorted(got) == sorted([*bodies, big])
        services = c._impl.services  # type: ignore[union-attr]
        assert services.direct
        conns = services.conns
        # the one broker connection, written and read here; the pull actor shared no ring,
        # so no body crossed through one
        assert [r.addr for r in conns.conns.values()] == [cluster.broker_addr()], conns.conns
        assert conns.has(cluster.broker_addr())
        assert not services.rings.maps, "an answer crossed through a ring"
        assert not services.conns.waiting
    finally:
        c.close()
