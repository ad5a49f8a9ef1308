"""Store benchmark: one compact table of median and spread over runs, ratios within each run.

`python -m tests.bench.store_bench [--runs 3] [-n 200000] [--recovery-gib 1] [--restart-gib 10]`

What each figure includes (ASYNC_FLUSH unless stated):
- raw: 1 KiB records with crc32 into a pre-touched anonymous mmap (the machine's ceiling),
  measured in the same run; every ratio is figure / raw of that run, then the median.
- put (single / batch of 32): n messages of 1 KiB with topic, TAGS, KEYS and UNIQ_KEY, encoded
  properties bytes as the broker has them. Like raw's, single put's body is one hot 1 KiB
  object; batches cycle through BATCH_POOL encoded bodies (4 MiB: what the broker has just read
  off its channel), and the "input cold" row gives each batch its own body (~n KiB from RAM);
  with the pool, KEYS and UNIQ_KEY repeat every 4096 messages, so the index (built in put in
  the "index in put" row, by the index process in "dispatched") touches fewer hash slots;
  the timed loop calls tick() with a real clock every 256 messages, so the periodic flush
  (flushIntervalCommitLog, least pages) and the consume queue flush run inside the timed
  region exactly as in the broker; the dirty tail left after
  the last put (< one flush interval) is flushed after the clock stops.
  Index modes: "sync" builds index entries inside put; "process" has `store.index_dispatch` build
  them in its own process; "dispatched" is n / time until that process has indexed the last
  record (the rate at which messages become fully dispatched: CQ + index).
- get: get_message of 32 x 1 KiB from one queue.
- SYNC_FLUSH: 64 threads each put_and_wait() through GroupCommit; and the broker's way: one
  writer appends the 64 records that arrived (one per producer), flush() once, acks all (a
  round per flush); each with the index built in put and, as in the broker, by the index
  process running concurrently (messageIndexDispatch=process). raw fsync/s is a pwrite +
  fdatasync loop of 1 KiB records in the same directory, in the same run.
- recovery (opt-in): abnormal recovery (abort marker left, CRC checked) of a commit log of
  --recovery-gib; clean restart of a store holding --restart-gib (real files, 1 GiB each).
"""

from __future__ import annotations

import argparse
import logging
import mmap
import os
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable

from protocol.message_batch import BatchItem, encode_batch
from protocol.message_properties import properties_to_string
from store.config import StoreConfig
from store.flush_service import GroupCommit
from store.index import java_hash_bytes
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

BODY = os.urandom(1024)
HOST = b"\x7f\x00\x00\x01\x00\x00\x27\x10"
TAGS_CODE = java_hash_bytes(b"TagA")
TICK_EVERY = 256
# batch input: 128 encoded batches of 32 x 1 KiB = 4 MiB, what the broker has just read off its
# channel (4 MiB socket buffers); raw's body and single put's body are one hot 1 KiB object
BATCH_POOL = 128


def raw_append_rate(n: int) -> float:
    """The machine's ceiling: 1 KiB records with crc32 into a pre-touched anonymous mmap."""
    size = n * 1024 + 4096
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
    os.makedirs(root, exist_ok=True)
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
        diskMaxUsedSpaceRatio=100,  # no retention on a busy shared disk mid-bench
        diskSpaceCleanForciblyRatio=100,
    )
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def _prop_dict(i: int) -> dict[str, str]:
    return {
        "TAGS": "TagA",
        "KEYS": f"order-{i}",
        "UNIQ_KEY": f"7F0000010001{i:020X}",
        "WAIT": "true",
    }


def _props(i: int) -> bytes:
    return properties_to_string(_prop_dict(i)).encode()


def _messages(n: int, queues: int = 4) -> list[MessageExtBrokerInner]:
    return [
        MessageExtBrokerInner(
            "BenchTopic",
            BODY,
            queue_id=i % queues,
            born_host=HOST,
            store_host=HOST,
            properties_string=_props(i),  # type: ignore[arg-type]
            tags_code=TAGS_CODE,
        )
        for i in range(n)
    ]


def _batch_bodies(n_batches: int, per: int) -> list[bytes]:
    return [
        encode_batch(BatchItem(body=BODY, properties=_prop_dict(b * per + j)) for j in range(per))
        for b in range(n_batches)
    ]


def _open(root: str, **kw: object) -> DefaultMessageStore:
    s = DefaultMessageStore(_cfg(root, **kw))
    s.load(0)
    s.start(0)
    return s


def _timed_puts(
    s: DefaultMessageStore, items: list, put: Callable[[object, int], object], per_item: int
) -> tuple[float, float]:
    """(put rate, fully-dispatched rate) with the periodic tick running inside the loop."""
    t0 = time.perf_counter()
    tick_every = max(1, TICK_EVERY // per_item)
    tick = s.tick
    base = 1_000_000
    now = base
    for i, it in enumerate(items):
        put(it, now)
        if i % tick_every == 0:
            now = base + int((time.perf_counter() - t0) * 1000)
            tick(now)
    t_put = time.perf_counter() - t0
    n = len(items) * per_item
    deadline = time.perf_counter() + 60
    target = s.max_phy_offset
    while s.indexed_offset < target and time.perf_counter() < deadline:
        time.sleep(0.0005)
    t_disp = time.perf_counter() - t0
    if s.indexed_offset < target:
        t_disp = float("inf")
    return n / t_put, n / t_disp


def bench_single(root: str, n: int, index: str = "sync") -> tuple[float, float]:
    """ASYNC_FLUSH put_message of n messages; (put rate, dispatched rate)."""
    s = _open(root, messageIndexDispatch=index)
    msgs = _messages(n + 4)
    for m in msgs[:4]:  # first unit of each queue creates (and warms) its consume-queue file
        s.put_message(m, 0)
    try:
        return _timed_puts(s, msgs[4:], s.put_message, 1)  # type: ignore[arg-type]
    finally:
        s.shutdown(10**9)


def bench_batch(
    root: str, n: int, per: int = 32, index: str = "sync", pool: int = BATCH_POOL
) -> tuple[float, float]:
    """ASYNC_FLUSH put_messages of n // per batches; (put rate, dispatched rate).

    pool > 0: the batches cycle through `pool` distinct encoded bodies (input as cache-warm as
    raw's and single put's); pool = 0: every batch is its own body (n KiB streamed from RAM)."""
    s = _open(root, messageIndexDispatch=index)
    count = n // per + 4
    bodies = _batch_bodies(min(pool, count) if pool > 0 else count, per)
    batches = [
        MessageExtBatch(
            "BenchTopic", bodies[i % len(bodies)], queue_id=i % 4, born_host=HOST, store_host=HOST
        )
        for i in range(count)
    ]
    for b in batches[:4]:
        s.put_messages(b, 0)
    try:
        return _timed_puts(s, batches[4:], s.put_messages, per)  # type: ignore[arg-type]
    finally:
        s.shutdown(10**9)


def bench_get(root: str, n: int) -> float:
    """get_message 32 x 1 KiB, messages/s."""
    s = _open(root, messageIndexEnable=False)
    for m in _messages(n, queues=1):
        s.put_message(m, 0)
    got = 0
    t = time.perf_counter()
    for _ in range(3):
        off = 0
        while off < n:
            res = s.get_message("g", "BenchTopic", 0, off, 32)
            got += res.message_count
            off = res.next_begin_offset
            res.release()
    dt = time.perf_counter() - t
    s.shutdown(0)
    return got / dt


def bench_group_commit(
    root: str, threads: int = 64, per_thread: int = 100, index: str = "sync"
) -> tuple[float, float]:
    """SYNC_FLUSH, `threads` writers through GroupCommit; (msgs/s, msgs per fsync)."""
    s = _open(root, flushDiskType="SYNC_FLUSH", messageIndexDispatch=index)
    gc = GroupCommit(s, timeout_s=30)
    msgs = _messages(threads * per_thread)
    for m in msgs[:4]:
        gc.put_and_wait(m, 0)
    gc.fsyncs = 0
    bad: list[str] = []

    def run(k: int) -> None:
        for j in range(per_thread):
            r = gc.put_and_wait(msgs[k * per_thread + j], 0)
            if not r.ok:
                bad.append(r.status.name)

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
    if bad:
        raise RuntimeError(f"group commit failures: {bad[:3]}")
    return threads * per_thread / dt, per_fsync


def bench_single_writer_commit(
    root: str, producers: int = 64, rounds: int = 300, index: str = "sync"
) -> tuple[float, float]:
    """SYNC_FLUSH as the broker does it: ONE writer (the send actor) appends every request that
    arrived, flushes once, answers all. `producers` each keep one record outstanding, so every
    round carries one record per producer; a record counts once flushed_offset covers it.
    index="process" is the broker's configuration: the index is built concurrently by its own
    process (the broker's IndexService actor), not inside put. Returns (msgs/s, msgs/flush)."""
    s = _open(root, flushDiskType="SYNC_FLUSH", messageIndexDispatch=index)
    msgs = _messages(producers * rounds)
    put, flush = s.put_message, s.flush
    acked = 0
    t = time.perf_counter()
    for r in range(rounds):
        ends = [put(m, r).end_offset for m in msgs[r * producers : (r + 1) * producers]]
        flushed = flush(r)
        acked += sum(1 for e in ends if e <= flushed)
    dt = time.perf_counter() - t
    s.shutdown(0)
    if acked != producers * rounds:
        raise RuntimeError(f"single-writer commit: {acked} of {producers * rounds} flushed")
    return acked / dt, float(producers)


def bench_recovery(root: str, gib: float) -> tuple[float, float]:
    """(abnormal recovery seconds, clean restart seconds) for a commit log of `gib` GiB."""
    cfg = _cfg(
        root,
        mappedFileSizeCommitLog=1 << 30,
        maxIndexNum=5_000_000,
        maxHashSlotNum=1_000_000,
    )
    s = DefaultMessageStore(cfg)
    s.load(0)
    s.start(0)
    target = int(gib * (1 << 30)) - (1 << 20)
    msgs = _messages(1000)
    i = 0
    while s.max_phy_offset < target:
        s.put_message(msgs[i % 1000], i)
        i += 1
        if i % 100_000 == 0:
            s.tick(i)
    s.shutdown(i)
    t = time.perf_counter()
    s = DefaultMessageStore(cfg)
    s.load(i)
    clean = time.perf_counter() - t
    s.close_abruptly()  # leaves the abort marker: the next load is abnormal
    t = time.perf_counter()
    s = DefaultMessageStore(cfg)
    s.load(i)
    abnormal = time.perf_counter() - t
    assert s.recovered_abnormally
    s.shutdown(i)
    return abnormal, clean


def bench_restart_large(root: str, gib: int) -> float:
    """Clean restart of a store of `gib` 1 GiB commit-log files (each file really written)."""
    cfg = _cfg(root, mappedFileSizeCommitLog=1 << 30, messageIndexDispatch="tick")
    s = DefaultMessageStore(cfg)
    s.load(0)
    s.start(0)
    msgs = _messages(1000)
    target = gib * (1 << 30) - (1 << 20)
    i = 0
    while s.max_phy_offset < target:
        # fill each file densely at its start and end, skip the middle with one huge record:
        # the files are real store files of valid records, without writing 10 GiB of 1 KiB puts
        s.put_message(msgs[i % 1000], i)
        i += 1
        if i % 2000 == 0:
            cur = s.commitlog.current_file
            if cur is not None and cur.wrote_position < (1 << 30) - (8 << 20):
                big = MessageExtBrokerInner(
                    "BenchTopic", bytes(min(4 << 20, (1 << 30) - (8 << 20) - cur.wrote_position)),
                    queue_id=0, born_host=HOST, store_host=HOST,
                )  # fmt: skip
                while cur.wrote_position < (1 << 30) - (16 << 20):
                    s.put_message(big, i)
            s.tick(i)
    s.shutdown(i)
    t = time.perf_counter()
    s = DefaultMessageStore(cfg)
    s.load(i)
    dt = time.perf_counter() - t
    s.shutdown(i)
    return dt


def _row(name: str, xs: list[float], raws: list[float] | None, target: str, unit: str) -> str:
    med = statistics.median(xs)
    cells = f"{name:<38} {med:>12,.0f} {min(xs):>11,.0f}-{max(xs):<11,.0f} {unit:<6}"
    if raws is not None:
        ratios = [x / r for x, r in zip(xs, raws, strict=True)]
        cells += f" {statistics.median(raws):>11,.0f} {statistics.median(ratios):>7.3f}"
    else:
        cells += f" {'':>11} {'':>7}"
    return cells + f"  {target}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=200_000)
    ap.add_argument("--recovery-gib", type=float, default=0.0)
    ap.add_argument("--restart-gib", type=int, default=0)
    ap.add_argument("--skip-modes", default="", help="comma list: sync,process,batch,gc,get")
    a = ap.parse_args()
    skip = set(a.skip_modes.split(",")) if a.skip_modes else set()
    res: dict[str, list[float]] = {}

    def add(k: str, v: float) -> None:
        res.setdefault(k, []).append(v)

    for _ in range(a.runs):
        root = tempfile.mkdtemp(prefix="store-bench-")
        try:
            add("raw", raw_append_rate(a.n))
            if "sync" not in skip:
                add("single_sync", bench_single(os.path.join(root, "s1"), a.n)[0])
                # index in the put: every batch its own keys (a pool would repeat them)
                add("batch_sync", bench_batch(os.path.join(root, "b1"), a.n, pool=0)[0])
            if "process" not in skip:
                p, d = bench_single(os.path.join(root, "s2"), a.n, index="process")
                add("single_proc", p)
                add("single_proc_disp", d)
                # the append: input cycling 128 batches; the dispatch figure comes from the
                # cold run, whose keys never repeat (repeated ones keep the index's slots warm)
                add("batch_proc", bench_batch(os.path.join(root, "b2"), a.n, index="process")[0])
                p, d = bench_batch(os.path.join(root, "b3"), a.n, index="process", pool=0)
                add("batch_proc_cold", p)
                add("batch_proc_disp", d)
            add("raw_after", raw_append_rate(a.n))
            if "get" not in skip:
                add("get", bench_get(os.path.join(root, "g"), min(a.n, 50_000)))
            if "gc" not in skip:
                add("fsync", raw_fsync_rate(os.path.join(root, "gc")))
                gc, per = bench_group_commit(os.path.join(root, "gc"))
                add("gc", gc)
                add("per_fsync", per)
                add("gc_writer", bench_single_writer_commit(os.path.join(root, "gw"))[0])
                gc, per = bench_group_commit(os.path.join(root, "gcp"), index="process")
                add("gc_proc", gc)
                add("per_fsync_proc", per)
                add("gc_writer_proc", bench_single_writer_commit(
                    os.path.join(root, "gwp"), index="process")[0])  # fmt: skip
        finally:
            shutil.rmtree(root, ignore_errors=True)
    raw = [(x + y) / 2 for x, y in zip(res["raw"], res["raw_after"], strict=True)]
    hdr = (
        f"{'figure (runs=' + str(a.runs) + ', n=' + str(a.n) + ')':<38} {'median':>12} "
        f"{'min-max':^23} {'unit':<6} {'raw/run':>11} {'ratio':>7}  target"
    )
    lines = [hdr, "-" * len(hdr)]
    lines.append(_row("raw crc32+mmap append 1 KiB", raw, None, "(ceiling)", "rec/s"))
    rows = [
        ("single_sync", "put_message, index in put", ">= 0.15"),
        ("single_proc", "put_message, index process", ">= 0.15"),
        ("single_proc_disp", "  fully dispatched (CQ+index)", "keeps up"),
        ("batch_sync", "put_messages x32, index in put", ">= 0.30"),
        ("batch_proc", "put_messages x32, index process", ">= 0.30"),
        ("batch_proc_cold", "  same, input cold (n/32 batches)", "(reported)"),
        ("batch_proc_disp", "  cold, fully dispatched (CQ+index)", "keeps up"),
    ]
    for key, name, target in rows:
        if key in res:
            lines.append(_row(name, res[key], raw, target, "msg/s"))
    if "get" in res:
        lines.append(_row("get_message 32 x 1 KiB", res["get"], None, ">= 300,000", "msg/s"))
    if "gc" in res:
        lines.append(_row("raw fdatasync 1 KiB", res["fsync"], None, "(ceiling)", "/s"))
        lines.append(_row("SYNC_FLUSH group commit, 64 threads", res["gc"], res["fsync"],
                          ">= 5 (x fsync/s)", "msg/s"))  # fmt: skip
        lines.append(_row("  messages per fsync", res["per_fsync"], None, "", ""))
        lines.append(_row("SYNC_FLUSH one writer, 64 producers", res["gc_writer"], res["fsync"],
                          ">= 5 (x fsync/s)", "msg/s"))  # fmt: skip
        lines.append(_row("SYNC_FLUSH group commit, index process", res["gc_proc"],
                          res["fsync"], ">= 5 (x fsync/s)", "msg/s"))  # fmt: skip
        lines.append(_row("  messages per fsync", res["per_fsync_proc"], None, "", ""))
        lines.append(_row("SYNC_FLUSH one writer, index process", res["gc_writer_proc"],
                          res["fsync"], ">= 5 (x fsync/s)", "msg/s"))  # fmt: skip
    if a.recovery_gib > 0:
        rec_ab: list[float] = []
        rec_cl: list[float] = []
        for _ in range(a.runs):
            root = tempfile.mkdtemp(prefix="store-bench-rec-")
            try:
                ab, cl = bench_recovery(root, a.recovery_gib)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            rec_ab.append(ab * 1000)
            rec_cl.append(cl * 1000)
        lines.append(_row(f"abnormal recovery {a.recovery_gib:g} GiB", rec_ab, None, "< 5000",
                          "ms"))  # fmt: skip
        lines.append(_row(f"clean restart {a.recovery_gib:g} GiB", rec_cl, None, "", "ms"))
    if a.restart_gib > 0:
        xs: list[float] = []
        for _ in range(a.runs):
            root = tempfile.mkdtemp(prefix="store-bench-big-")
            try:
                xs.append(bench_restart_large(root, a.restart_gib) * 1000)
            finally:
                shutil.rmtree(root, ignore_errors=True)
        lines.append(_row(f"clean restart {a.restart_gib} GiB", xs, None, "< 1000", "ms"))
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
