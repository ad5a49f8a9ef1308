"""Building the index: DefaultMessageStore's CommitLogDispatcherBuildIndex and its three modes.

Mirrors store/DefaultMessageStore.java CommitLogDispatcherBuildIndex over
store/index/IndexService.java, RocketMQ 4.9.x. "sync" indexes each record as it is put (Java's
way); "tick" lets the index lag behind and catches up on the writer's tick (IndexDispatcher);
"process" leaves it to a separate `python -m store.index_dispatch` process that owns the index
files. The state page publishes how far the index goes (OFF_INDEX_PHY).
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys

from store.index import IndexService, index_key_hashes, key_hash
from store.index_dispatch import INDEX_RETRY_S, IndexDispatcher
from store.message_store_fields import MessageStoreFields
from store.state_page import (
    OFF_INDEX_PHY,
)

log = logging.getLogger(__name__)


def key_hashes(pre: bytes, pre_h: int, keys: list[bytes]) -> list[int]:
    """abs(hashCode(pre + key)) of each key, hashed in one pass (pre_h = hashCode(pre))."""
    hashes = index_key_hashes(pre_h, keys)
    if -1 in hashes:
        hashes = [h if h >= 0 else key_hash(pre + k) for h, k in zip(hashes, keys, strict=True)]
    return hashes


class BuildIndexMixin(MessageStoreFields):
    """Where the index dispatch resumes, the index process, and how far the index goes."""

    def _setup_index_dispatch(self, indexed_word: int) -> None:
        """After recovery: where the lagging index dispatch resumes ("tick" / "process")."""
        if self._index_mode not in ("tick", "process"):
            return
        cl = self.commitlog
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
        assert self.state is not None
        self.state.set(OFF_INDEX_PHY, resume)
        if self._index_mode == "tick":
            self._index_disp = IndexDispatcher(cl, self.index, resume, idx_end)
            return
        # "process": the index process owns the files from now on; this writer only reads them
        self.index.flush()
        self.index.close()
        self.index = IndexService(
            self.root, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum, writable=False
        )
        self.index.refresh()
        self._index_unlock()

    def _index_lock(self) -> None:
        """Wait for any index process of an earlier writer to be gone (it holds this flock)."""
        os.makedirs(self.index.path, exist_ok=True)
        fd = os.open(os.path.join(self.index.path, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._index_lock_fd = fd

    def _index_unlock(self) -> None:
        if self._index_lock_fd is not None:
            fcntl.flock(self._index_lock_fd, fcntl.LOCK_UN)
            os.close(self._index_lock_fd)
            self._index_lock_fd = None

    def _spawn_index_process(self) -> None:
        """Start `python -m store.index_dispatch` as the owner of the index files."""
        cfg = self.cfg
        args = [
            sys.executable, "-m", "store.index_dispatch", self.root,
            f"maxHashSlotNum={cfg.maxHashSlotNum}", f"maxIndexNum={cfg.maxIndexNum}",
            f"mappedFileSizeCommitLog={cfg.mappedFileSizeCommitLog}",
        ]  # fmt: skip
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
        self._index_proc = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True
        )
        log.info("started index process pid=%d root=%s", self._index_proc.pid, self.root)

    def _stop_index_process(self, kill: bool = False) -> None:
        proc = self._index_proc
        if proc is None:
            return
        self._index_proc = None
        if not kill and self.state is not None:
            # let it index everything written (bounded: ~60 s while it is alive)
            target = self.commitlog.max_offset
            for _ in range(12_000):
                if self.state.get(OFF_INDEX_PHY) >= target:
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
    def indexed_offset(self) -> int:
        """Commit-log offset below which every record's index entries are written."""
        if self._index_mode in ("sync", "off"):
            return self.commitlog.max_offset
        if self._index_disp is not None:
            return self._index_disp.indexed_phy
        return self.state.get(OFF_INDEX_PHY) if self.state is not None else 0

    def dispatch_index(self, now_ms: int, max_records: int = 1 << 30) -> int:
        """"tick" mode: index records appended since the last call; returns records walked."""
        disp = self._index_disp
        if disp is None:
            return 0
        if disp.pending is not None and now_ms < self._index_retry_ms:
            return 0  # a full disk: entries left over are put again every INDEX_RETRY_S
        limit = self._published_max()
        if disp.next_phy >= limit and disp.pending is None:
            return 0
        n = disp.catch_up(limit, now_ms, max_records)
        if disp.pending is not None:
            self._index_retry_ms = now_ms + int(INDEX_RETRY_S * 1000)
        if self.state is not None:
            self.state.set(OFF_INDEX_PHY, disp.indexed_phy)
        return n

    def _refresh_index(self) -> None:
        if self._index_mode == "process":
            self.index.refresh()
        elif self._index_disp is not None:
            self.dispatch_index(self.commitlog.last_store_timestamp)
