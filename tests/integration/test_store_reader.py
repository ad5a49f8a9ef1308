"""A reader process follows a writer appending 200,000 records.

The reader must see every record exactly once and never a torn one, and never take a
consume-queue unit the writer is still writing for a visible one.

Run as a module (`python -m tests.integration.test_store_reader ROOT N`) it is the reader.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zlib

import pytest

from store.config import StoreConfig
from store.get_message_result import GetMessageStatus
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.message_store import DefaultMessageStore

N = int(os.environ.get("STORE_READER_RECORDS", "200000"))
QUEUES = 2


def _cfg(root: str) -> StoreConfig:
    return StoreConfig(
        storePathRootDir=root,
        mappedFileSizeCommitLog=1 << 20,
        mappedFileSizeConsumeQueue=20 * 20_000,
        maxHashSlotNum=1024,
        maxIndexNum=50_000,
        totalPhysicalMemory=1 << 30,
        # the host's disk may be >= 75 % full (other benches): retention must not delete the
        # files the reader is following (that is tested elsewhere)
        diskMaxUsedSpaceRatio=100,
        diskSpaceCleanForciblyRatio=100,
    )


def reader_main(root: str, n: int) -> None:
    """Follow the store until n records are seen; print 'OK <count>' or the first problem."""
    from protocol.record import decode_record_fields
    from store.message_store_reader import MessageStoreReader

    deadline = time.monotonic() + 170  # bounded; the writer side waits at most 180 s
    while not os.path.exists(os.path.join(root, "state")) and time.monotonic() < deadline:
        time.sleep(0.01)
    rd = MessageStoreReader(_cfg(root))
    offsets = [0] * QUEUES
    expect = [0] * QUEUES  # next sequence number per queue
    seen = 0
    while seen < n and time.monotonic() < deadline:
        progressed = False
        for q in range(QUEUES):
            res = rd.get_message("g", "R", q, offsets[q], 32)
            # the queue's last visible unit points below the max the view trusted: a unit
            # read while the writer wrote it must not count (it once did in ~1 of 2 runs, and
            # a get then skipped its record)
            cq = rd.consume_queues.get(("R", q))
            top = cq.get_max_offset_in_queue() if cq is not None else 0
            u = cq.get_unit(top - 1) if cq is not None and top else None
            if cq is not None and u is not None and u[0] + u[1] > cq.cl_max:
                print(f"BEYOND q={q} unit={top - 1} {u} max={cq.cl_max}", flush=True)
                return
            if res.status is not GetMessageStatus.FOUND:
                continue
            buf = res.buffer
            pos = 0
            while pos < len(buf):
                f = decode_record_fields(buf, pos)
                if zlib.crc32(f.body) & 0x7FFFFFFF != f.body_crc:
                    print(f"TORN crc at {f.phy_offset}", flush=True)
                    return
                s = int(bytes(f.body[:8]))
                if s != expect[q] or f.queue_offset != expect[q]:
                    print(f"ORDER q={q} got={s} qoff={f.queue_offset} want={expect[q]}", flush=True)
                    return
                expect[q] += 1
                seen += 1
                pos += f.total_size
            offsets[q] = res.next_begin_offset
            progressed = True
        if not progressed:
            time.sleep(0.0005)
    if seen < n:
        print(f"TIMEOUT seen={seen} offsets={offsets}", flush=True)
        return
    print(f"OK {seen}", flush=True)


@pytest.mark.slow
def test_reader_follows_writer(tmp_path):
    root = str(tmp_path / "store")
    s = DefaultMessageStore(_cfg(root))
    s.load(0)
    s.start(0)
    out = tmp_path / "reader.out"
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(out, "wb") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.test_store_reader", root, str(N)],
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    try:
        seqs = [0] * QUEUES
        pad = b"p" * 60
        for i in range(N):
            q = i % QUEUES
            body = b"%08d" % seqs[q] + pad[: i % 60]
            seqs[q] += 1
            r = s.put_message(MessageExtBrokerInner("R", body, queue_id=q), i)
            assert r.ok
            if i % 5000 == 0:
                s.tick(i)
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    text = out.read_text()
    assert text.strip() == f"OK {N}", text[-2000:]
    if N >= 100_000:
        assert len(s.commitlog.mfq.files) > 5  # the reader had to discover new files
    s.shutdown(N)


if __name__ == "__main__":
    reader_main(sys.argv[1], int(sys.argv[2]))
