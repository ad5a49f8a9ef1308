"""The unmodified ali-ons Node client against a real actormq cluster (spec §14.6, §14.7 row 10).

tests/clients/alions_roundtrip.js creates the topic (UPDATE_AND_CREATE_TOPIC), produces 100
messages with keys and tags, and consumes them with a push consumer; every step prints one
JSON line. The driver runs with its output in files, a bounded timeout, killed by PID.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.e2e_helpers import run_driver, start_real

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
DRIVER = CLIENTS / "alions_roundtrip.js"
COUNT = 100
DRIVER_TIMEOUT_MS = 60000
WALL_TIMEOUT_S = 120.0


def _skip_reason() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (CLIENTS / "node_modules" / "ali-ons").is_dir():
        return "tests/clients/node_modules/ali-ons missing (run `cd tests/clients && npm install`)"
    return None


def test_alions_produce_and_consume_100(local_cluster, tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_real(local_cluster)
    topic = "AliOnsRoundTrip"
    code, events, err = run_driver(
        ["node", str(DRIVER), cluster.namesrv_addr(), topic, str(COUNT), str(DRIVER_TIMEOUT_MS)],
        tmp_path / "alions", WALL_TIMEOUT_S, cwd=CLIENTS,
    )
    kinds = [e.get("event") for e in events]
    errors = [e for e in events if e.get("event") == "error"]
    assert code == 0 and not errors, f"driver exit={code} errors={errors} stderr={err}"
    assert "topic_created" in kinds and kinds[-1] == "done"
    created = next(e for e in events if e["event"] == "topic_created")
    assert created["masters"] == [f"127.0.0.1:{cluster.broker_port()}"]

    sent = {e["i"]: e for e in events if e["event"] == "sent"}
    assert sorted(sent) == list(range(COUNT))
    assert all(e["status"] == "SEND_OK" for e in sent.values())
    received = [e for e in events if e["event"] == "received"]
    bodies = [e["body"] for e in received]
    assert len(bodies) == len(set(bodies)) == COUNT, "every message exactly once"
    for r in received:
        i = int(r["body"].removeprefix("body-"))
        s = sent[i]
        assert r["topic"] == topic
        assert r["tags"] == f"Tag{i % 3}"
        keys = r["keys"] if isinstance(r["keys"], list) else str(r["keys"]).split()
        assert keys == [f"key-{i}"]
        # ext fields are strings on the wire, so the send result carries queueId as a string
        assert (r["queueId"], r["queueOffset"]) == (int(s["queueId"]), int(s["queueOffset"]))
        assert r["reconsumeTimes"] == 0
    # last, the timing requirements (causal state replication, registration barrier): Java answers
    # UPDATE_AND_CREATE_TOPIC after re-registering, so the first route lookup after it
    # succeeds (spec §3.4); and a consumer's first rebalance, right after its first heartbeat,
    # finds its group (§9.2, §14.3 step 3)
    ready = next(e for e in events if e["event"] == "route_ready")
    started = next(e for e in events if e["event"] == "consumer_ready")
    assert ready["routed"] and ready["probes"] == 1 and started["consumerListRetries"] == 0, (
        ready, started)
