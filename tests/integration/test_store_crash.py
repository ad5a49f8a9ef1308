"""Real crash test: a SYNC_FLUSH writer process acknowledges each record, then gets SIGKILL.

After every kill the store is recovered (abnormal recovery) and every acknowledged record must
read back intact. Run as a module (`python -m tests.integration.test_store_crash DIR ROUND`)
it is the writer.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from store.config import StoreConfig
from store.get_message_result import GetMessageStatus
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.message_store import DefaultMessageStore

ROUNDS = int(os.environ.get("STORE_CRASH_ROUNDS", "20"))


def _cfg(root: str) -> StoreConfig:
    return StoreConfig(
        storePathRootDir=root,
        flushDiskType="SYNC_FLUSH",
        mappedFileSizeCommitLog=64 * 1024,
        mappedFileSizeConsumeQueue=20 * 500,
        maxHashSlotNum=64,
        maxIndexNum=2000,
        totalPhysicalMemory=1 << 30,
    )


def writer_main(root: str, round_no: int) -> None:
    """Append records forever; print 'seq' after each is flushed."""
    s = DefaultMessageStore(_cfg(root))
    s.load(round_no)
    s.start(round_no)
    out = sys.stdout
    seq = 0
    while True:
        body = f"{round_no}:{seq}:".encode() * (1 + seq % 20)
        r = s.put_message(
            MessageExtBrokerInner(
                "C", body, properties={"KEYS": f"{round_no}-{seq}"}, queue_id=seq % 2
            ),
            round_no * 100_000 + seq,
        )
        assert r.ok
        if s.flush(0) >= r.end_offset:
            out.write(f"{seq}\n")
            out.flush()
        seq += 1


def _read_all(s: DefaultMessageStore) -> set[bytes]:
    from protocol.record import decode_record_fields

    bodies: set[bytes] = set()
    for q in (0, 1):
        off = 0
        for _ in range(100_000):
            res = s.get_message("g", "C", q, off, 32)
            if res.status is not GetMessageStatus.FOUND:
                break
            buf = res.buffer
            pos = 0
            while pos < len(buf):
                f = decode_record_fields(buf, pos)
                bodies.add(bytes(f.body))
                pos += f.total_size
            off = res.next_begin_offset
    return bodies


@pytest.mark.slow
def test_sigkill_rounds(tmp_path):
    root = str(tmp_path / "store")
    rnd = random.Random(1234)
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    total_acked = 0
    for round_no in range(1, ROUNDS + 1):
        ack_path = tmp_path / f"acks{round_no}"
        with open(ack_path, "wb") as ack:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.test_store_crash", root, str(round_no)],
                stdout=ack,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=env,
            )
            try:
                # wait for the first ack (bounded), then let it run a random while
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and os.path.getsize(ack_path) == 0:
                    if proc.poll() is not None:
                        break
                    time.sleep(0.01)
                time.sleep(rnd.uniform(0.0, 0.15))
            finally:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        lines = ack_path.read_bytes().split(b"\n")
        acked = [int(x) for x in lines[:-1]]  # the last line may be torn
        assert acked, f"round {round_no}: writer never acknowledged"
        s = DefaultMessageStore(_cfg(root))
        s.load(round_no)
        s.start(round_no)
        assert s.recovered_abnormally
        got = _read_all(s)
        for seq in acked:
            body = f"{round_no}:{seq}:".encode() * (1 + seq % 20)
            assert body in got, f"round {round_no}: acknowledged record {seq} lost"
        assert s.check() == []
        s.shutdown(round_no)
        total_acked += len(acked)
    assert total_acked >= ROUNDS


if __name__ == "__main__":
    writer_main(sys.argv[1], int(sys.argv[2]))
