"""Building the index: DefaultMessageStore's CommitLogDispatcherBuildIndex and its three modes.

Mirrors store/DefaultMessageStore.java CommitLogDispatcherBuildIndex over
store/index/IndexService.java (buildIndex), RocketMQ 4.9.x. "sync" indexes each record as it is
dispatched (Java's way); "tick" lets the index lag behind and catches up on the writer's tick
(IndexDispatcher); "process" leaves it to a separate `python -m store.index_dispatch` process
that owns the index files. The state page publishes how far the index goes (OFF_INDEX_PHY).
This dispatcher owns the IndexService, the lagging dispatcher, the index process and its lock.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys

from store.commitlog import CommitLog
from store.config import StoreConfig
from store.index import IndexService, index_key_hashes, java_hash_bytes, key_hash
from store.index_dispatch import INDEX_RETRY_S, IndexDispatcher
from store.state_page import OFF_INDEX_PHY, StatePage

log = logging.getLogger(__name__)

_PREFIX_CACHE_LIMIT = 4096


def key_hashes(pre: bytes, pre_h: int, keys: list[bytes]) -> list[int]:
    """abs(hashCode(pre + key)) of each key, hashed in one pass (pre_h = hashCode(pre))."""
    hashes = index_key_hashes(pre_h, keys)
    if -1 in hashes:
        hashes = [h if h >= 0 else key_hash(pre + k) for h, k in zip(hashes, keys, strict=True)]
    return hashes


class CommitLogDispatcherBuildIndex:
    """The index part of the dispatch, in the configured mode."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.storePathRootDir
        self.mode = cfg.index_mode
        self.inline = self.mode == "sync"  # entries built in the dispatch itself
        self.index = IndexService(self.root, cfg.maxHashSlotNum, cfg.maxIndexNum)
        self._prefixes: dict[str, tuple[bytes, int]] = {}  # topic -> (b"topic#", its hash)
        self._lagging: IndexDispatcher | None = None  # "tick"
        self._proc: subprocess.Popen[bytes] | None = None  # "process"
        self._lock_fd: int | None = None
        self._retry_ms = 0  # "tick": when entries a full disk left over are put again
        self._state: StatePage | None = None

    # ---- building entries ("sync") -----------------------------------------------------------
    def _prefix(self, topic: str) -> tuple[bytes, int]:
        p = self._prefixes.get(topic)
        if p is None:
            pre = topic.encode() + b"#"
            if len(self._prefixes) >= _PREFIX_CACHE_LIMIT:
                self._prefixes.clear()
            p = self._prefixes[topic] = (pre, java_hash_bytes(pre) & 0xFFFFFFFF)
        return p

    def build(self, topic: str, keys: list[bytes], phy: int, store_ts: int, now_ms: int) -> bool:
        """buildIndex: topic#key entries of one record; False when not all could be written."""
        pre, pre_h = self._prefix(topic)
        hashes = key_hashes(pre, pre_h, keys)
        return self.index.put_hashes(hashes, phy, store_ts, now_ms) >= len(hashes)

    def build_batch(self, topic: str, keys: list[bytes], phys: list[int], now_ms: int) -> bool:
        """buildIndex of a batch's records (keys[i] of the record at phys[i]), hashed at once."""
        pre, pre_h = self._prefix(topic)
        hashes = key_hashes(pre, pre_h, keys)
        n = len(hashes)
        return self.index.put_hash_batch(hashes, phys, [now_ms] * n, now_ms) >= n

    def has_room(self, n: int) -> bool:
        """n entries fit without making or growing an index file."""
        return self.index.has_room(n)

    def reserve(self, n: int, now_ms: int) -> None:
        """Make room for n entries; OSError (a full disk) with nothing written."""
        self.index.reserve(n, now_ms)

    def first_file(self, now_ms: int) -> None:
        """At start: the first index file ("sync" / "tick"; a full disk: IndexService logs it
        and indexing waits)."""
        if self.mode in ("sync", "tick") and not self.index.files:
            self.index.put_hash_batch([], [], [], now_ms)

    def retry_after_error(self, now_ms: int) -> bool:
        """"sync" index after WRITE_INDEX_FILE_ERROR: True once an entry fits again."""
        try:
            self.index.reserve(1, now_ms)
        except OSError:
            return False
        return True

    # ---- load, recovery and the lagging modes ------------------------------------------------
    def load(self) -> None:
        """Map the index files ("process": after any earlier index process let go of them)."""
        if self.mode == "process":
            os.makedirs(self.index.path, exist_ok=True)
            fd = os.open(os.path.join(self.index.path, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_fd = fd
        self.index.load()

    def recovered_end(self) -> int:
        """The phy offset below which recovery need not index again (-1: everything; a lagging
        mode resumes on its own, from setup)."""
        return self.index.end_phy if self.inline else 1 << 62

    def setup(self, commitlog: CommitLog, state: StatePage, indexed_word: int) -> None:
        """After recovery: where the lagging index dispatch resumes ("tick" / "process")."""
        self._state = state
        if self.mode not in ("tick", "process"):
            return
        cl = commitlog
        end = cl.max_offset
        idx_end = self.index.end_phy
        if idx_end >= 0 and idx_end >= cl.min_offset:
            size = cl.record_size_at(idx_end)
            resume = idx_end + size if size > 0 else idx_end
        else:
            resume = cl.min_offset
        if cl.min_offset <= indexed_word <= end:  # clean restart: the owner's own progress
            resume = max(resume, indexed_word)
        resume = min(resume, end)
        state.set(OFF_INDEX_PHY, resume)
        if self.mode == "tick":
            self._lagging = IndexDispatcher(cl, self.index, resume, idx_end)
            return
        # "process": the index process owns the files from now on; this writer only reads them
        self.index.flush()
        self.index.close()
        self.index = IndexService(
            self.root, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum, writable=False
        )
        self.index.refresh()
        self.unlock()

    def unlock(self) -> None:
        """Let go of the index lock (the index process takes it)."""
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def spawn_process(self) -> None:
        """"process": start `python -m store.index_dispatch` as the owner of the index files."""
        if self.mode != "process" or not self.cfg.messageIndexProcessSpawn or self._proc:
            return
        cfg = self.cfg
        args = [
            sys.executable, "-m", "store.index_dispatch", self.root,
            f"maxHashSlotNum={cfg.maxHashSlotNum}", f"maxIndexNum={cfg.maxIndexNum}",
            f"mappedFileSizeCommitLog={cfg.mappedFileSizeCommitLog}",
        ]  # fmt: skip
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
        self._proc = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True
        )
        log.info("started index process pid=%d root=%s", self._proc.pid, self.root)

    def stop_process(self, target: int, kill: bool = False) -> None:
        """Stop the index process, letting it index up to target first unless kill (bounded:
        ~60 s while it is alive)."""
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        state = self._state
        if not kill and state is not None:
            for _ in range(12_000):
                if state.get(OFF_INDEX_PHY) >= target:
                    break
                try:
                    proc.wait(timeout=0.005)
                    break  # it exited on its own; the next start resumes from its progress
                except subprocess.TimeoutExpired:
                    pass
        if proc.poll() is None:
            if kill:
                proc.kill()
            else:
                proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        log.info("index process stopped pid=%d code=%s", proc.pid, proc.returncode)

    @property
    def lagging(self) -> bool:
        """The index is built by the tick ("tick" mode after setup)."""
        return self._lagging is not None

    def indexed_offset(self, max_offset: int) -> int:
        """Commit-log offset below which every record's index entries are written."""
        if self.mode in ("sync", "off"):
            return max_offset
        if self._lagging is not None:
            return self._lagging.indexed_phy
        st = self._state
        return st.get(OFF_INDEX_PHY) if st is not None else 0

    def dispatch(self, limit: int, now_ms: int, max_records: int = 1 << 30) -> int:
        """"tick": index records up to limit (the published end); returns records walked."""
        disp = self._lagging
        if disp is None:
            return 0
        if disp.pending is not None and now_ms < self._retry_ms:
            return 0  # a full disk: entries left over are put again every INDEX_RETRY_S
        if disp.next_phy >= limit and disp.pending is None:
            return 0
        n = disp.catch_up(limit, now_ms, max_records)
        if disp.pending is not None:
            self._retry_ms = now_ms + int(INDEX_RETRY_S * 1000)
        st = self._state
        if st is not None:
            st.set(OFF_INDEX_PHY, disp.indexed_phy)
        return n

    def refresh(self, limit: int, now_ms: int) -> None:
        """Before a query: see what the index owner wrote ("process"), or catch up ("tick")."""
        if self.mode == "process":
            self.index.refresh()
        elif self._lagging is not None:
            self.dispatch(limit, now_ms)

    # ---- the index files -----------------------------------------------------------------------
    def truncate(self, phy_offset: int) -> None:
        """Drop entries at or after phy_offset (recovery)."""
        self.index.truncate_from_phy(phy_offset)

    def delete_expired(self, min_phy: int) -> None:
        """Delete index files below the commit log's start (not "process": its owner does)."""
        if self.mode != "process":
            self.index.delete_expired(min_phy)

    def last_full_file_end_ts(self) -> int:
        """End store time of the newest index file that is full (the checkpoint's index time;
        0 when none is)."""
        full = self.index.files[:-1]
        return full[-1].end_ts if full else 0

    def close(self, flush: bool) -> None:
        """Flush (unless the store goes down abruptly), unmap, let go of the lock and the state
        page (the caller stopped the index process first)."""
        if flush:
            self.index.flush()
        self.index.close()
        self.unlock()
        self._state = None
