"""kill -9 of the whole broker during a SYNC_FLUSH load, then restart (spec §6.6, §14.7 row 12).

The broker runs as a user runs it, `python -m deploy broker -c broker.conf`, in its own
process tree (launcher, Thespian admin, actors), every process tagged with an environment
marker so the test can SIGKILL exactly those PIDs. After the restart every message that was
answered SEND_OK must pull back intact, and the recovered store must pass check().
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deploy import launch
from deploy.wire import BlockingClient
from protocol.message import decode_messages, decode_offset_msg_id
from tests.integration.conftest import MarkedProcess, wait_gone
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    SMALL_STORE,
    assert_store_clean,
    create_topic_cmd,
    msg_props,
    pull_cmd,
    send_cmd,
    wait_until,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent.parent
TOPIC = "CrashTopic"
QUEUES = 4
KILL_AFTER_ACKS = 1500
COMMITLOG_FILE = 256 * 1024  # small: the load spans several files, recovery crosses them
MAX_MESSAGES = 20000
LOAD_WINDOW = 16
LOAD_TIMEOUT_S = 60.0


class BrokerProcess(MarkedProcess):
    """`python -m deploy broker -c broker.conf`."""

    def __init__(self, conf: Path, tmp: Path, run: int) -> None:
        super().__init__([sys.executable, "-m", "deploy", "broker", "-c", str(conf)],
                         tmp / f"broker{run}", str(ROOT))  # fmt: skip

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until the 'broker ... listening' line (bounded)."""
        self.wait_for("listening on", timeout_s)


def _write_conf(path: Path, store: Path, port: int) -> None:
    props = {"brokerClusterName": "DefaultCluster", "brokerName": "broker-crash",
             "brokerId": "0", "listenPort": str(port), "storePathRootDir": str(store),
             "flushDiskType": "SYNC_FLUSH", "brokerRole": "ASYNC_MASTER", **SMALL_STORE,
             "mappedFileSizeCommitLog": str(COMMITLOG_FILE)}
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def _load(port: int, acked: list[dict[str, Any]], stop: threading.Event) -> None:
    """Pipelined sends until the connection dies, stop is set, or the bounds are hit."""
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    n = 0
    try:
        with BlockingClient(("127.0.0.1", port)) as cl:
            while not stop.is_set() and n < MAX_MESSAGES and time.monotonic() < deadline:
                window = []
                for _ in range(LOAD_WINDOW):
                    props = msg_props(tags="crash", keys=f"k{n}")
                    body = f"crash-body-{n}-".encode() * (1 + n % 7)
                    window.append((send_cmd(TOPIC, body, props, queue_id=n % QUEUES), body, props))
                    n += 1
                cl.send_raw(b"".join(req.encode() for req, _, _ in window))
                for req, body, props in window:
                    resp = cl.wait_response(req.opaque, RPC_TIMEOUT_S)
                    if resp.code == 0:
                        acked.append({"body": body, "uniq": props["UNIQ_KEY"],
                                      "queueId": int(resp.ext_fields["queueId"]),
                                      "queueOffset": int(resp.ext_fields["queueOffset"]),
                                      "msgId": resp.ext_fields["msgId"]})
    except (ConnectionError, TimeoutError, OSError):
        pass  # the broker was killed under us: expected


def _pull_all(port: int) -> dict[str, Any]:
    """Every message of every queue of TOPIC, by UNIQ_KEY (bounded pulls)."""
    got: dict[str, Any] = {}
    with BlockingClient(("127.0.0.1", port)) as cl:
        for qid in range(QUEUES):
            offset = 0
            for _ in range(MAX_MESSAGES):
                resp = cl.invoke(pull_cmd("crash_cg", TOPIC, qid, offset), RPC_TIMEOUT_S)
                if resp.code != 0:
                    assert resp.code == 19, (qid, offset, resp.code, resp.remark)
                    break
                for m in decode_messages(bytes(resp.body), check_crc=True):
                    got[m.properties["UNIQ_KEY"]] = m
                offset = int(resp.ext_fields["nextBeginOffset"])
    return got


def test_kill9_during_sync_flush_load_loses_no_acked_message(tmp_path: Path) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    port = launch.stable_free_port(pair=True)
    _write_conf(conf, store, port)

    first = BrokerProcess(conf, tmp_path, 1)
    second: BrokerProcess | None = None
    try:
        first.wait_ready()
        topics_json = store / "config" / "topics.json"
        with BlockingClient(("127.0.0.1", port)) as cl:
            assert cl.invoke(create_topic_cmd(TOPIC, QUEUES), RPC_TIMEOUT_S).code == 0
            assert wait_until(lambda: topics_json.exists() and TOPIC in topics_json.read_text(),
                              10.0), "topics.json never got the created topic"
            assert wait_until(lambda: cl.invoke(pull_cmd("crash_cg", TOPIC, 0, 0),
                                                RPC_TIMEOUT_S).code != 17, 10.0)

        acked: list[dict[str, Any]] = []
        stop = threading.Event()
        loader = threading.Thread(target=_load, args=(port, acked, stop), daemon=True)
        loader.start()
        assert wait_until(lambda: len(acked) >= KILL_AFTER_ACKS or not loader.is_alive(),
                          LOAD_TIMEOUT_S, 0.01)
        killed = first.kill9()
        assert killed, "no broker process to kill"
        stop.set()
        loader.join(RPC_TIMEOUT_S + 5)
        assert not loader.is_alive()
        assert wait_gone(killed, 15.0) == []
        first.proc.wait(10)
        assert len(acked) >= KILL_AFTER_ACKS, f"only {len(acked)} acks before the kill"
        assert (store / "abort").exists(), "abort marker missing after kill -9"

        second = BrokerProcess(conf, tmp_path, 2)
        second.wait_ready()
        got = _pull_all(port)
        missing = [a for a in acked if a["uniq"] not in got]
        assert not missing, f"{len(missing)}/{len(acked)} acked messages lost: {missing[:3]}"
        for a in acked:
            m = got[a["uniq"]]
            assert m.body == a["body"]
            assert (m.queue_id, m.queue_offset) == (a["queueId"], a["queueOffset"])
            assert m.commit_log_offset == decode_offset_msg_id(a["msgId"])[2]
        # every queue is dense: offsets 0..n-1 with no holes
        for qid in range(QUEUES):
            offs = sorted(m.queue_offset for m in got.values() if m.queue_id == qid)
            assert offs == list(range(len(offs)))
        assert second.stop() == 0
        second = None
    finally:
        for bp in (first, second):
            if bp is not None:
                bp.stop()

    assert_store_clean(store, flushDiskType="SYNC_FLUSH",
                       mappedFileSizeCommitLog=str(COMMITLOG_FILE))  # fmt: skip
