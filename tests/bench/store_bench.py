"""Store benchmark.

`python -m tests.bench.store_bench [--runs 3] [--recovery-gib 1] [--restart-gib 10]`.

Prints median and spread over the runs; every ratio compares with ceilings measured in the same
run (a raw crc32 + mmap append loop, raw fsyncs per second).
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import struct
import tempfile
import threading
import time
import zlib

from protocol.record import properties_to_string
from store.config import StoreConfig
from store.message_store import (
    DefaultMessageStore,
    GroupCommit,
    MessageExtBatch,
    MessageExtBrokerInner,
)

BODY = os.urandom(1024)
HOST = b"\x7f\x00\x00\x01\x00\x00\x27\x10"


def raw_append_rate(n: int) -> float:
    """The machine's ceiling: 1 KiB records with crc32 into a pre-touched anonymous mmap."""
    size = n * 1100 + 4096
    mm = mmap.mmap(-1, size)
    mm[0:size:4096] = bytes(len(range(0, size, 4096)))
    hdr = struct.Struct(">iiIq")
    body = BODY[:1004]
    t = time.perf_counter()
    pos = 0
    for i in range(n):
        hdr.pack_into(mm, pos, 1024, 1, zlib.crc32(body), i)
        mm[pos + 20 : pos + 1024] = body
        pos += 1024
    dt = time.perf_counter() - t
    mm.close()
    return n / dt


def raw_fsync_rate(root: str, seconds: float = 0.5) -> float:
    """fdatasync per 1 KiB write, per second."""
    path = os.path.join(root, "fsync.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    n = 0
    t = time.perf_counter()
    try:
        while time.perf_counter() - t < seconds and n < 100_000:
            os.pwrite(fd, BODY, n * 1024)
            os.fdatasync(fd)
            n += 1
    finally:
        os.close(fd)
        os.unlink(path)
    return n / (time.perf_counter() - t)


def _cfg(root: str, **kw: object) -> StoreConfig:
    base: dict[str, object] = dict(
        storePathRootDir=root,
        mappedFileSizeCommitLog=256 << 20,
        maxHashSlotNum=500_000,
        maxIndexNum=2_000_000,
    )
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def _messages(n: int) -> list[MessageExtBrokerInner]:
    out = []
    for i in range(n):
        props = {"TAGS": "TagA", "KEYS": f"order-{i}", "UNIQ_KEY": f"7F0000010001{i:020X}"}
        out.append(
            MessageExtBrokerInner(
                "BenchTopic",
                BODY,
                properties=props,
                queue_id=i % 4,
                born_host=HOST,
                store_host=HOST,
                properties_string=properties_to_string(props),
            )
        )
    return out


def _batch_bodies(n_batches: int, per: int) -> list[bytes]:
    out = []
    k = 0
    for _ in range(n_batches):
        items = []
        for _ in range(per):
            p = properties_to_string(
                {"TAGS": "TagA", "KEYS": f"order-{k}", "UNIQ_KEY": f"7F0000010001{k:020X}"}
            ).encode()
            items.append(
                (22 + len(BODY) + len(p)).to_bytes(4, "big")
                + bytes(12)
                + len(BODY).to_bytes(4, "big")
                + BODY
                + len(p).to_bytes(2, "big")
                + p
            )
            k += 1
        out.append(b"".join(items))
    return out


def bench_single(root: str, n: int) -> float:
    s = DefaultMessageStore(_cfg(root))
    s.load(0)
    s.start(0)
    msgs = _messages(n)
    put = s.put_message
    t = time.perf_counter()
    for i, m in enumerate(msgs):
        put(m, i)
    s.tick(10**9)
    dt = time.perf_counter() - t
    s.shutdown(10**9)
    return n / dt


def bench_batch(root: str, n: int, per: int = 32) -> float:
    s = DefaultMessageStore(_cfg(root))
    s.load(0)
    s.start(0)
    bodies = _batch_bodies(n // per, per)
    batches = [
        MessageExtBatch("BenchTopic", b, queue_id=i % 4, born_host=HOST, store_host=HOST)
        for i, b in enumerate(bodies)
    ]
    t = time.perf_counter()
    for i, b in enumerate(batches):
        r = s.put_messages(b, i)
    s.tick(10**9)
    dt = time.perf_counter() - t
    assert r.ok
    s.shutdown(10**9)
    return len(batches) * per / dt


def bench_get(root: str, n: int) -> float:
    s = DefaultMessageStore(_cfg(root, messageIndexEnable=False))
    s.load(0)
    s.start(0)
    for m in _messages(n):
        m.queue_id = 0
        s.put_message(m, 0)
    got = 0
    t = time.perf_counter()
    for _ in range(3):
        off = 0
        while off < n:
            res = s.get_message("g", "BenchTopic", 0, off, 32)
            got += res.message_count
            _ = res.buffers
            off = res.next_begin_offset
            res.release()
    dt = time.perf_counter() - t
    s.shutdown(0)
    return got / dt


def bench_group_commit(root: str, threads: int = 64, per_thread: int = 40) -> tuple[float, float]:
    s = DefaultMessageStore(_cfg(root, flushDiskType="SYNC_FLUSH"))
    s.load(0)
    s.start(0)
    gc = GroupCommit(s, timeout_s=30)
    msgs = _messages(threads * per_thread)

    def run(k: int) -> None:
        for j in range(per_thread):
            r = gc.put_and_wait(msgs[k * per_thread + j], 0)
            assert r.ok

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join(timeout=120)
    dt = time.perf_counter() - t
    gc.close()
    per_fsync = threads * per_thread / max(1, gc.fsyncs)
    s.shutdown(0)
    return threads * per_thread / dt, per_fsync


def bench_recovery(root: str, gib: float) -> tuple[float, float]:
    """(abnormal recovery seconds, clean restart seconds) for a commit log of `gib` GiB."""
    cfg = _cfg(
        root, mappedFileSizeCommitLog=1 << 30, maxIndexNum=5_000_000, maxHashSlotNum=1_000_000
    )
    s = DefaultMessageStore(cfg)
    s.load(0)
    s.start(0)
    target = int(gib * (1 << 30)) - (1 << 20)
    msgs = _messages(1000)
    i = 0
    while s.max_phy_offset < target:
        m = msgs[i % 1000]
        m.properties_string = None
        s.put_message(m, i)
        i += 1
    s.flush(i)
    s.shutdown(i)
    t = time.perf_counter()
    s = DefaultMessageStore(cfg)
    s.load(i)
    clean = time.perf_counter() - t
    s.close_abruptly()  # leaves the abort marker: next load is abnormal
    t = time.perf_counter()
    s = DefaultMessageStore(cfg)
    s.load(i)
    abnormal = time.perf_counter() - t
    assert s.recovered_abnormally
    s.shutdown(i)
    return abnormal, clean


def _fmt(xs: list[float]) -> str:
    return f"median {statistics.median(xs):,.0f} (min {min(xs):,.0f}, max {max(xs):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=100_000)
    ap.add_argument("--recovery-gib", type=float, default=0.0)
    ap.add_argument("--restart-gib", type=float, default=0.0)
    a = ap.parse_args()
    res: dict[str, list[float]] = {
        k: [] for k in ("raw", "single", "batch", "get", "fsync", "gc", "per_fsync")
    }
    for _ in range(a.runs):
        root = tempfile.mkdtemp(prefix="store-bench-")
        try:
            res["raw"].append(raw_append_rate(a.n))
            res["single"].append(bench_single(os.path.join(root, "s"), a.n))
            res["batch"].append(bench_batch(os.path.join(root, "b"), a.n))
            res["get"].append(bench_get(os.path.join(root, "g"), min(a.n, 50_000)))
            res["fsync"].append(raw_fsync_rate(root))
            gc, per = bench_group_commit(os.path.join(root, "gc"))
            res["gc"].append(gc)
            res["per_fsync"].append(per)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"raw crc32+mmap append, 1 KiB:      {_fmt(res['raw'])} rec/s")
    print(
        f"put_message, 1 KiB, tags+keys:     {_fmt(res['single'])} msg/s  "
        f"ratio {med['single'] / med['raw']:.3f} (target >= 0.15)"
    )
    print(
        f"put_messages, batches of 32:       {_fmt(res['batch'])} msg/s  "
        f"ratio {med['batch'] / med['raw']:.3f} (target >= 0.30)"
    )
    print(f"get_message 32 x 1 KiB:            {_fmt(res['get'])} msg/s (target >= 300,000)")
    print(f"raw fdatasync per record:          {_fmt(res['fsync'])} /s")
    print(
        f"SYNC_FLUSH group commit, 64 thr:   {_fmt(res['gc'])} msg/s  "
        f"ratio {med['gc'] / med['fsync']:.1f}x fsync rate (target >= 5), "
        f"{med['per_fsync']:.1f} msgs per fsync"
    )
    for gib, label in ((a.recovery_gib, "abnormal recovery"), (a.restart_gib, "clean restart")):
        if gib <= 0:
            continue
        root = tempfile.mkdtemp(prefix="store-bench-rec-")
        try:
            abnormal, clean = bench_recovery(root, gib)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"{label} of {gib:g} GiB: abnormal {abnormal:.2f} s, clean {clean:.2f} s")


if __name__ == "__main__":
    main()
