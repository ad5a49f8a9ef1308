"""A producer keeps sending (sync and async) while one of two brokers is killed with SIGKILL:
every send answered SEND_OK is stored, on the survivor or in the dead broker's store (read
after its recovery), and the sends after the kill go to the survivor."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from actors.client import Message, MQClientError, Producer
from protocol.message import decode_messages
from store.config import StoreConfig
from store.message_store import DefaultMessageStore
from tests.integration.client_helpers import (
    read_topic,
    route_of,
    start_actormq,
    stop_actormq,
    system_pids,
)
from tests.integration.conftest import kill_pids, wait_gone
from tests.integration.e2e_helpers import SMALL_STORE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _stored_in(store_root: str, topic: str, queues: int) -> set[str]:
    """UNIQ_KEYs of the topic's messages in a stopped broker's store (recovered first)."""
    cfg = StoreConfig.from_properties(dict(SMALL_STORE, storePathRootDir=store_root))
    ds = DefaultMessageStore(cfg)
    now = int(time.time() * 1000)
    assert ds.load(now)
    ids: set[str] = set()
    try:
        for qid in range(queues):
            offset = 0
            for _ in range(10_000):
                got = ds.get_message("check", topic, qid, offset, 256, now_ms=now)
                if not got.message_count:
                    break
                ids |= {m.properties["UNIQ_KEY"] for m in decode_messages(bytes(got.buffer))}
                offset = got.next_begin_offset
    finally:
        ds.shutdown(now)
    return ids


def test_producer_survives_a_killed_broker(tmp_path: Path) -> None:
    target = start_actormq(tmp_path, brokers=("broker-a", "broker-b"))
    topic = "Failover"
    ok: dict[str, str] = {}  # msg_id -> broker it was stored on
    failed = 0
    futures: list[Any] = []
    try:
        with Producer("pg_failover", namesrv=target.namesrv, send_timeout=5.0) as p:
            route = None
            for i in range(40):  # the topic on both brokers before the kill
                r = p.send(Message(topic, b"pre%d" % i))
                ok[r.msg_id] = r.queue.broker_name
                route = route_of(target, topic)
                if route is not None and len(route.queue_datas) == 2 and i >= 20:
                    break
            assert {b for b in ok.values()} == {"broker-a", "broker-b"}
            victim = system_pids(target, 1)
            for i in range(300):
                if i == 50:
                    kill_pids(victim)  # broker-b dies mid-stream, as kill -9 would do
                    assert wait_gone(victim, 10.0) == []
                    dead = target.handle[1]
                    dead.stopped = True  # nothing left to stop
                    shutil.rmtree(dead.runtime_dir, ignore_errors=True)
                if i % 2:
                    futures.append(p.send_async(Message(topic, b"a%d" % i)))
                    continue
                try:
                    r = p.send(Message(topic, b"s%d" % i))
                except MQClientError:
                    failed += 1
                    continue
                ok[r.msg_id] = r.queue.broker_name
            assert p.flush(30) == 0
        for f in futures:
            if f.exception() is None:
                ok[f.result().msg_id] = f.result().queue.broker_name
            else:
                failed += 1
        after_kill = [b for mid, b in list(ok.items())[-100:]]
        assert after_kill.count("broker-a") >= 95  # the survivor takes the traffic
        assert failed <= 3, f"{failed} sends failed despite the retries"
        on_a = {m.properties["UNIQ_KEY"]
                for m in read_topic(target, topic, only=("broker-a",))}
    finally:
        survivors = stop_actormq(target)
    on_b = _stored_in(os.path.join(str(tmp_path / "broker-b-1"), "store"), topic, 4)
    lost = [mid for mid, b in ok.items() if mid not in (on_a if b == "broker-a" else on_b)]
    assert lost == [], f"{len(lost)} sends answered SEND_OK are not stored"
    assert survivors == []

