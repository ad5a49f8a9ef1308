"""Hypothesis state machine: the store against a plain list model, with crashes and recovery."""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.message_batch import BatchItem, encode_batch
from store.message_ext_broker_inner import MessageExtBatch
from tests.unit.store.store_helpers import msg, open_store, pull_all, small_config

QUEUES = 3


def _batch_body(bodies: list[bytes]) -> bytes:
    return encode_batch([BatchItem(body=b, properties={"TAGS": "B"}) for b in bodies])


class StoreMachine(RuleBasedStateMachine):
    """Appends, flushes, clean reopens and crashes against a list model."""

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="h3-store-")
        self.cfg = small_config(
            self.root, mappedFileSizeCommitLog=8 * 1024, mappedFileSizeConsumeQueue=20 * 16
        )
        self.store = open_store(self.cfg)
        self.model: list[tuple[int, bytes]] = []
        self.durable = 0  # model prefix acknowledged as flushed
        self.now = 1_000
        self.seq = 0

    def teardown(self) -> None:
        if self.store.state is not None:
            self.store.shutdown(self.now)
        shutil.rmtree(self.root, ignore_errors=True)

    def _body(self, size: int) -> bytes:
        self.seq += 1
        return self.seq.to_bytes(4, "big") * (size // 4 + 1)

    @rule(qid=st.integers(0, QUEUES - 1), size=st.integers(0, 900))
    def append(self, qid: int, size: int) -> None:
        self.now += 1
        body = self._body(size)
        r = self.store.put_message(msg(body=body, qid=qid, keys=f"s{self.seq}"), self.now)
        assert r.ok
        self.model.append((qid, body))

    @rule(
        qid=st.integers(0, QUEUES - 1), sizes=st.lists(st.integers(0, 500), min_size=1, max_size=6)
    )
    def append_batch(self, qid: int, sizes: list[int]) -> None:
        self.now += 1
        bodies = [self._body(s) for s in sizes]
        r = self.store.put_messages(
            MessageExtBatch("T", _batch_body(bodies), queue_id=qid), self.now
        )
        assert r.ok and r.msg_num == len(bodies)
        self.model.extend((qid, b) for b in bodies)

    @rule()
    def flush(self) -> None:
        self.store.flush(self.now)
        assert self.store.flushed_offset == self.store.max_phy_offset
        self.durable = len(self.model)

    @rule()
    def reopen(self) -> None:
        self.store.shutdown(self.now)
        self.store = open_store(self.cfg, self.now)
        self.durable = len(self.model)
        self._verify_exact()

    @precondition(lambda self: self.model)
    @rule(data=st.data(), zero=st.booleans())
    def crash(self, data: st.DataObject, zero: bool) -> None:
        s = self.store
        flushed = s.flushed_offset
        max_phy = s.max_phy_offset
        files = [mf for mf in s.commitlog.mfq.files if mf.file_from_offset < max_phy]
        last = files[-1]
        path, start, size = last.path, last.file_from_offset, last.file_size
        s.close_abruptly()
        lo = max(0, flushed - start)
        hi = max(lo, max_phy - start)
        cut = data.draw(st.integers(lo, hi), label="cut")
        if zero:
            with open(path, "r+b") as f:
                f.seek(cut)
                f.write(bytes(size - cut))
        else:
            os.truncate(path, cut)
        self.store = open_store(self.cfg, self.now)
        assert self.store.recovered_abnormally
        total = sum(self.store.get_max_offset_in_queue("T", q) for q in range(QUEUES))
        assert self.durable <= total <= len(self.model)
        self.model = self.model[:total]
        self.durable = total
        self._verify_exact()

    def _verify_exact(self) -> None:
        s = self.store
        for q in range(QUEUES):
            expect = [b for qid, b in self.model if qid == q]
            recs = pull_all(s, "T", q, len(expect) + 2)
            assert [o for o, _ in recs] == list(range(len(recs))), f"queue {q}"
            assert [b for _, b in recs] == expect, f"queue {q}"
        assert s.check() == []

    @invariant()
    def queue_table_matches(self) -> None:
        for q in range(QUEUES):
            n = sum(1 for qid, _ in self.model if qid == q)
            assert self.store.get_max_offset_in_queue("T", q) == n


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
