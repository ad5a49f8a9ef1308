"""Index dispatch that follows the commit log: RocketMQ's ReputMessageService, index part.

Mirrors store/DefaultMessageStore.java (ReputMessageService, CommitLogDispatcherBuildIndex) and
store/index/IndexService.java (buildIndex), RocketMQ 4.9.x.

The writer appends records and their consume-queue units synchronously; index entries may be
built later by an `IndexDispatcher` that walks the records from `next_phy` up to a limit (the
writer's max offset). It runs either inside the writer (`messageIndexDispatch=tick`, from
`tick()`) or in its own process (`messageIndexDispatch=process`, `python -m store.index_dispatch
<storePathRootDir> key=value ...`), which is then the only process that writes index files and
the `index_phy` word of the state page (published after the entries, like max_phy).

Key hashes: Java hashCode("topic#key") = hash("topic#") * 31**len(key) + hash(key) (mod 2**32),
so the topic prefix is hashed once per topic and only the key bytes per record.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import sys
import time
from typing import Final, Protocol

from protocol.message_properties import index_keys
from protocol.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    RecordError,
    read_total_and_magic,
    record_at,
)
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.index import IndexService, index_key_hashes, java_hash_bytes, key_hash
from store.state_page import OFF_INDEX_PHY, OFF_MAX_PHY, OFF_MIN_PHY, StatePage

log = logging.getLogger(__name__)

_ROLLBACK: Final = 0xC
INDEX_RETRY_S: Final = 1.0  # a full disk: how often entries left over are put again


class IndexSink(Protocol):
    """Where a dispatcher puts (hash, phy, store time) entries: an IndexService, or a filter."""

    def put_hash_batch(
        self, hashes: list[int], phys: list[int], tss: list[int], now_ms: int
    ) -> int:
        """Write the entries in order; how many were written (the rest waits: a full disk)."""
        ...


class IndexDispatcher:
    """Walks commit-log records from next_phy and adds their keys to the index."""

    def __init__(
        self, commitlog: CommitLog, index: IndexSink, next_phy: int, skip_upto: int = -1
    ) -> None:
        self.commitlog = commitlog
        self.index = index
        self.next_phy = next_phy
        self.skip_upto = skip_upto  # records at or below this phy are already indexed
        self._prefix: dict[bytes, int] = {}  # topic -> hashCode(topic + "#") unsigned
        self.records = 0
        # entries of records walked already that the index could not take yet (a full disk):
        # (hashes, phys, store times), put again before anything else
        self.pending: tuple[list[int], list[int], list[int]] | None = None

    @property
    def indexed_phy(self) -> int:
        """Commit-log offset below which every record's entries are written."""
        pending = self.pending
        return pending[1][0] if pending is not None else self.next_phy

    def put_pending(self, now_ms: int) -> bool:
        """Put the entries left over by a full disk; True when none is left."""
        pending = self.pending
        if pending is None:
            return True
        hashes, phys, tss = pending
        n = self.index.put_hash_batch(hashes, phys, tss, now_ms if now_ms > 0 else tss[-1])
        self.pending = None if n >= len(hashes) else (hashes[n:], phys[n:], tss[n:])
        return self.pending is None

    def _topic_prefix(self, topic: bytes) -> int:
        h = self._prefix[topic] = java_hash_bytes(topic + b"#") & 0xFFFFFFFF
        return h

    def catch_up(self, limit: int, now_ms: int, max_records: int = 1 << 30) -> int:
        """Index records in [next_phy, limit); returns how many records were walked.

        Keys are collected per call and hashed in one pass (index_key_hashes), then written.
        """
        if not self.put_pending(now_ms):
            return 0
        cl = self.commitlog
        done = 0
        keys: list[bytes] = []
        pres: list[int] = []
        phys: list[int] = []
        tss: list[int] = []
        prefixes = self._prefix
        skip = self.skip_upto
        while self.next_phy < limit and done < max_records:
            phy = self.next_phy
            mf = cl.mfq.find_mapped_file_by_offset(phy)
            if mf is None:
                if not cl.writable:
                    cl.mfq.refresh()
                mf = cl.mfq.find_mapped_file_by_offset(phy)
                if mf is None:
                    nxt = cl.mfq.files[0].file_from_offset if cl.mfq.files else limit
                    if nxt <= phy:
                        break
                    self.next_phy = nxt  # retention removed what we had not indexed
                    continue
            mm = mf.mm
            find = mm.find
            base = mf.file_from_offset
            p = phy - base
            fend = min(limit - base, mf.file_size)
            while p < fend and done < max_records:
                if p + 8 > mf.file_size:
                    p = mf.file_size
                    break
                try:
                    r = record_at(mm, p, fend)
                except RecordError:
                    total, magic = read_total_and_magic(mm, p)
                    if magic == MESSAGE_MAGIC_CODE and p + total > fend >= p + 8:
                        # not all of it is below the limit yet: done for now
                        self.next_phy = base + p
                        self._put(keys, pres, phys, tss, now_ms)
                        self.records += done
                        return done
                    r = None
                if r is None:
                    if read_total_and_magic(mm, p)[1] == BLANK_MAGIC_CODE:
                        p = mf.file_size  # the file's END_FILE blank
                        break
                    log.warning("index dispatch: no record at phy=%d", base + p)
                    self.next_phy = base + p
                    self._put(keys, pres, phys, tss, now_ms)
                    return done
                total = r[0]
                done += 1
                rphy = base + p
                if r[6] & _ROLLBACK == _ROLLBACK or rphy <= skip:
                    p += total
                    continue
                ps = r[16]
                pe = ps + r[17]
                # both names hold "KEY": most records have neither (one search says so); the
                # rule reads a copy (an mmap's rfind took 1-7 us at offsets of a 1 GiB map)
                ks = index_keys(mm[ps:pe]) if find(b"KEY", ps, pe) >= 0 else None
                if ks:
                    topic = mm[r[14] : r[14] + r[15]]
                    ph = prefixes.get(topic)
                    if ph is None:
                        ph = self._topic_prefix(topic)
                    ts = r[8]
                    for k in ks:
                        keys.append(k)
                        pres.append(ph)
                        phys.append(rphy)
                        tss.append(ts)
                p += total
            self.next_phy = base + p
            if p >= mf.file_size:
                self.next_phy = mf.file_end_offset
        self._put(keys, pres, phys, tss, now_ms)
        self.records += done
        return done

    def _put(
        self, keys: list[bytes], pres: list[int], phys: list[int], tss: list[int], now_ms: int
    ) -> None:
        if keys:
            hashes = index_key_hashes(pres, keys)
            if -1 in hashes:  # non-ASCII keys: hash the whole "topic#key" string
                topics = {h: t for t, h in self._prefix.items()}
                hashes = [
                    h if h >= 0 else key_hash(topics[ph] + b"#" + k)
                    for h, ph, k in zip(hashes, pres, keys, strict=True)
                ]
            # index file names need a time: without a clock, the newest store time will do
            n = self.index.put_hash_batch(hashes, phys, tss, now_ms if now_ms > 0 else tss[-1])
            if n < len(hashes):  # the rest waits for disk space (put_pending)
                self.pending = (hashes[n:], phys[n:], tss[n:])
            keys.clear()
            pres.clear()
            phys.clear()
            tss.clear()


# ---- the index owner outside the writer ---------------------------------------------------------
class IndexFollower:
    """Owns the index files of a store written by another process and follows its commit log.

    Used by the `python -m store.index_dispatch` process and by the broker's IndexService actor:
    `open()` waits (up to wait_s) for the index lock, `step()` indexes what the writer published,
    `close()` drains to the writer's final max offset and publishes the progress.
    """

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        root = cfg.storePathRootDir
        self.state = StatePage(os.path.join(root, "state"), writable=True)
        self.commitlog = CommitLog(cfg, writable=False)
        self.index = IndexService(root, cfg.maxHashSlotNum, cfg.maxIndexNum)
        self.disp: IndexDispatcher | None = None
        self._lock_fd = -1
        self._min_seen = -1
        self._retry_at = 0.0  # monotonic time before which entries left over are not put again

    def open(self, wait_s: float = 0.0) -> bool:
        """Take the index lock (one index writer) and load; False if it stays taken."""
        os.makedirs(self.index.path, exist_ok=True)
        fd = os.open(os.path.join(self.index.path, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.01)
        self._lock_fd = fd
        self.commitlog.mfq.refresh()
        self.index.load()
        self.disp = IndexDispatcher(
            self.commitlog, self.index, self.state.get(OFF_INDEX_PHY), self.index.end_phy
        )
        self._min_seen = self.state.get(OFF_MIN_PHY)
        return True

    @property
    def next_phy(self) -> int:
        """Commit-log offset below which every record is indexed."""
        return self.disp.indexed_phy if self.disp is not None else 0

    def step(self, max_records: int = 65536) -> int:
        """Index up to max_records published records; returns how many were walked. Entries a
        full disk left over are put again first, at most every INDEX_RETRY_S (each try
        allocates index file blocks, or a whole new file's slot table, and gives them back)."""
        disp = self.disp
        if disp is None:
            return 0
        if disp.pending is not None:
            now = time.monotonic()
            if now < self._retry_at:
                return 0
            if not disp.put_pending(0):
                self._retry_at = now + INDEX_RETRY_S
                return 0
            self.state.set(OFF_INDEX_PHY, disp.indexed_phy)
        limit = self.state.get(OFF_MAX_PHY)
        if disp.next_phy < limit:
            n = disp.catch_up(limit, 0, max_records)
            if disp.pending is not None:
                self._retry_at = time.monotonic() + INDEX_RETRY_S
            self.state.set(OFF_INDEX_PHY, disp.indexed_phy)
            return n
        m = self.state.get(OFF_MIN_PHY)
        if m != self._min_seen:  # retention moved the commit log's start: drop old index files
            self._min_seen = m
            self.index.delete_expired(m)
        return 0

    def close(self, drain: bool = True) -> int:
        """Index what is left (drain), flush, publish the progress, release; the progress."""
        nxt = -1
        if self.disp is not None:
            while drain and self.step() > 0:
                pass
            self.index.flush()
            nxt = self.disp.indexed_phy
            self.state.set(OFF_INDEX_PHY, nxt)
            self.disp = None
        self.index.close()
        self.commitlog.close()
        self.state.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1
        return nxt


IDLE_POLL_MIN_S: Final = 0.0005
IDLE_POLL_MAX_S: Final = 0.005


def run_process(
    cfg: StoreConfig, poll_s: float = IDLE_POLL_MIN_S, max_poll_s: float = IDLE_POLL_MAX_S
) -> int:
    """Follow the writer's published max offset and build the index until told to stop.

    While records arrive it looks again every poll_s; each empty look doubles the wait up to
    max_poll_s (ReputMessageService sleeps 1 ms between looks; idle, looking every 0.5 ms cost
    2.4% of a CPU here, backing off to 5 ms 0.8%)."""
    follower = IndexFollower(cfg)
    follower.open(wait_s=1e9)  # the store waits on this lock at load: an earlier owner exits
    stop = False

    def _on_term(_sig: int, _frm: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    parent = os.getppid()
    wait_s = poll_s
    while os.getppid() == parent and not stop:
        if follower.step() == 0:
            time.sleep(wait_s)
            wait_s = min(wait_s * 2, max_poll_s)
        else:
            wait_s = poll_s
    follower.close(drain=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m store.index_dispatch ROOT [key=value ...]` (StoreConfig property names)."""
    args = sys.argv[1:] if argv is None else argv
    props = dict(a.split("=", 1) for a in args[1:] if "=" in a)
    props["storePathRootDir"] = args[0]
    cfg = StoreConfig.from_properties(props)
    return run_process(cfg)


if __name__ == "__main__":
    sys.exit(main())
