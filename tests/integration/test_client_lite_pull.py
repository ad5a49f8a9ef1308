"""LitePullConsumer / AsyncLitePullConsumer against a real actormq cluster: subscribe with
commits across a restart, assign with seek / pause / resume / timestamps, asyncio iteration."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.client.consumer.lite_pull_consumer import AsyncLitePullConsumer, LitePullConsumer
from tests.integration.client_helpers import (
    Target,
    start_actormq,
    start_reference,
    stop_actormq,
)
from tests.integration.consumer_helpers import FAST, create_topic, produce

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["actormq", "reference"])
def cluster(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """actormq (started as `actormq up` starts it) or the reference RocketMQ 4.9.8."""
    base = Path(tmp_path_factory.mktemp(f"lite-{request.param}"))
    if request.param == "actormq":
        target = start_actormq(base)
        try:
            yield target
        finally:
            assert stop_actormq(target) == []
    else:
        request.getfixturevalue("reference_build")
        target = start_reference(base)
        try:
            yield target
        finally:
            target.handle.stop()


def drain(c: LitePullConsumer, want: int, timeout_s: float = 20.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got += [m.body for m in c.poll(0.5)]
    return got


def test_subscribe_poll_commit_and_resume_after_restart(cluster: Target) -> None:
    topic, group = "LiteSub", "lite_sub_cg"
    create_topic(cluster, topic, 4)
    produce(cluster.namesrv, topic, (b"a%d" % i for i in range(200)))
    with LitePullConsumer(group, namesrv=cluster.namesrv, consume_from="first",
                          auto_commit=False, **FAST) as c:
        c.subscribe(topic)
        got = drain(c, 200)
        assert sorted(got) == sorted(b"a%d" % i for i in range(200))
        c.commit()  # synchronous: the broker has the offsets now
        committed = {mq: c.committed(mq) for mq in c.assignment() if mq.topic == topic}
        assert sum(committed.values()) == 200
    produce(cluster.namesrv, topic, (b"b%d" % i for i in range(50)))
    with LitePullConsumer(group, namesrv=cluster.namesrv, consume_from="first", **FAST) as c:
        c.subscribe(topic)
        got = drain(c, 50)
        time.sleep(0.5)
        got += [m.body for m in c.poll(0.2)]
        assert sorted(got) == sorted(b"b%d" % i for i in range(50))  # nothing of before


def test_assign_seek_pause_resume_and_timestamps(cluster: Target) -> None:
    topic, group = "LiteAssign", "lite_assign_cg"
    create_topic(cluster, topic, 4)
    produce(cluster.namesrv, topic, (b"%d" % i for i in range(80)))
    with LitePullConsumer(group, namesrv=cluster.namesrv, consume_from="first") as c:
        queues = c.fetch_message_queues(topic)
        assert len(queues) == 4
        mine = queues[:2]
        c.assign(mine)
        assert c.assignment() == set(mine)
        first: dict[int, list[int]] = {}
        deadline = time.monotonic() + 20
        while sum(len(v) for v in first.values()) < 40 and time.monotonic() < deadline:
            for m in c.poll(0.5):
                assert m.queue in mine
                first.setdefault(m.queue.queue_id, []).append(m.queue_offset)
        assert sum(len(v) for v in first.values()) == 40  # 80 round-robin over 4 queues
        q = mine[0]
        c.seek(q, 5)
        again = [m.queue_offset for m in c.poll(10) if m.queue == q]
        assert again and again[0] == 5
        c.seek_to_end(q)
        c.pause([mine[1]])
        produce(cluster.namesrv, topic, (b"late%d" % i for i in range(8)))
        late = drain(c, 2, 10)
        assert late and all(b.startswith(b"late") for b in late)
        c.resume([mine[1]])
        more = drain(c, 2, 10)
        assert more and all(b.startswith(b"late") for b in more)
        ts = c.offset_for_timestamp(q, int(time.time() * 1000) + 60_000)
        assert ts >= 20  # after everything stored
        with pytest.raises(Exception, match="mutually exclusive"):
            c.subscribe(topic)


def test_async_lite_pull_consumer(cluster: Target) -> None:
    topic, group = "LiteAsync", "lite_async_cg"
    create_topic(cluster, topic, 2)
    produce(cluster.namesrv, topic, (b"%d" % i for i in range(60)))

    async def main() -> list[bytes]:
        got: list[bytes] = []
        async with AsyncLitePullConsumer(group, namesrv=cluster.namesrv, consume_from="first",
                                         **FAST) as c:
            c.subscribe(topic)

            async def read() -> None:
                async for m in c:
                    got.append(m.body)
                    if len(got) == 60:
                        return

            await asyncio.wait_for(read(), 20)
        return got

    got = asyncio.run(main())
    assert sorted(got) == sorted(b"%d" % i for i in range(60))
