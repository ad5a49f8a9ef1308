"""A commit-log roll between a reader's two state-page loads loses no record.

A reader (the broker's pull actor) loads the state page's max_phy and generation for every get.
When the writer rolls to a new commit-log file between those two loads, the reader must never
trust units pointing into a file it has not mapped: the get skipped them, answering FOUND with a
next offset past their records (DefaultMessageStore.getMessage, read from another process).
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.record import decode_record_fields
from store.get_message_result import GetMessageResult, GetMessageStatus
from store.message_store import DefaultMessageStore
from store.message_store_reader import MessageStoreReader
from store.state_page import StatePage
from tests.unit.store.store_helpers import msg, small_config


class _WriterBetweenLoads:
    """The reader's state page; once armed, `between()` runs right after the next load of
    max_phy or generation, as if the writer ran between that load and the reader's next one."""

    def __init__(self, page: StatePage) -> None:
        self.page = page
        self.between: Callable[[], None] | None = None
        self.interleaved = 0

    def _loaded(self, value: int) -> int:
        act, self.between = self.between, None
        if act is not None:
            act()
            self.interleaved += 1
        return value

    @property
    def max_phy(self) -> int:
        return self._loaded(self.page.max_phy)

    @property
    def generation(self) -> int:
        return self._loaded(self.page.generation)

    @property
    def min_phy(self) -> int:
        return self.page.min_phy

    def close(self) -> None:
        self.page.close()


def _seqs(res: GetMessageResult) -> list[int]:
    out = []
    buf = res.buffer
    pos = 0
    while pos < len(buf):
        f = decode_record_fields(buf, pos)
        out.append(int(bytes(f.body[:6])))
        pos += f.total_size
    return out


def test_roll_between_the_readers_loads(tmp_path) -> None:
    cfg = small_config(str(tmp_path / "s"), mappedFileSizeConsumeQueue=20 * 1024)
    s = DefaultMessageStore(cfg)
    # no allocate thread: each file after the second is made at the roll that needs it, so
    # the reader cannot have mapped it ahead of time
    s.flush_thread_enabled = False
    s.load(1_000)
    s.start(1_000)
    written = 0

    def put(n: int) -> None:
        nonlocal written
        for _ in range(n):
            body = b"%06d" % written + b"x" * 300
            assert s.put_message(msg(body=body), 2_000 + written).ok
            written += 1

    size = cfg.mappedFileSizeCommitLog

    def near_end() -> None:  # the writer leaves room for about two more records in its file
        while size - s.commitlog.max_offset % size > 3 * 330:
            put(1)

    def roll() -> None:  # ... then goes on into a file made just now
        files = len(s.commitlog.mfq.files)
        while len(s.commitlog.mfq.files) == files:
            put(1)
        put(3)

    try:
        put(5)
        rd = MessageStoreReader(cfg)
        page = _WriterBetweenLoads(rd.state)
        rd.state = page  # type: ignore[assignment]
        try:
            got: list[int] = []
            off = 0
            for _ in range(200):  # bounded: a few gets per roll
                if off == written and written < 200:  # caught up
                    if size - s.commitlog.max_offset % size > 3 * 330:
                        near_end()  # the reader catches up again first
                    else:
                        page.between = roll  # the writer rolls inside the next get
                res = rd.get_message("g", "T", 0, off, 32)
                if res.status is GetMessageStatus.FOUND:
                    got += _seqs(res)
                    off = res.next_begin_offset
                res.release()
                if written >= 200 and off == written:
                    break
            assert got == list(range(written))
            assert page.interleaved >= 4  # rolls inside gets, each into a file made then
        finally:
            rd.close()
    finally:
        s.shutdown(10_000)
