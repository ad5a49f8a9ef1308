"""The store side of master-slave replication: a master's commit-log bytes, read the way its HA
service reads them (get_commit_log_data: per file, at most a batch), appended to a slave store
in arbitrary pieces; the slave's reput gives every complete record its consume-queue unit, so
the slave serves the same messages, survives a restart and passes check()."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.get_message_result import GetMessageStatus
from store.ha import (
    HEADER,
    REPORT,
    HAStreamError,
    ReportDecoder,
    TransferDecoder,
    master_start_offset,
)
from store.message_store_reader import MessageStoreReader
from tests.unit.store.store_helpers import msg, open_store, small_config


def _fill(master: Any, n: int, t0: int = 1_000) -> None:
    for i in range(n):
        r = master.put_message(msg(body=b"m%05d" % i + b"x" * (i % 300), qid=i % 3,
                                   keys=f"k{i}", uniq=f"U{i:06d}"), t0 + i)  # fmt: skip
        assert r.ok


def _replicate(reader: Any, slave: Any, start: int, rng: random.Random, now: int) -> int:
    """Ship everything the master published from `start`, in random piece sizes; new end."""
    pos = start
    while True:
        data = reader.get_commit_log_data(pos, rng.choice((7, 100, 1000, 32 * 1024)))
        if data is None:
            return pos
        assert slave.append_to_commit_log(pos, bytes(data), now)
        pos += len(data)


def _bodies(store: Any, topic: str, qid: int) -> list[bytes]:
    out: list[bytes] = []
    off = max(0, store.get_min_offset_in_queue(topic, qid))
    while True:
        r = store.get_message("g", topic, qid, off, 32)
        if r.status is not GetMessageStatus.FOUND:
            return out
        from protocol.message import decode_messages

        out += [bytes(m.body) for m in decode_messages(r.buffer)]
        off = r.next_begin_offset


def test_slave_store_follows_the_master_across_file_rolls(tmp_path: Any) -> None:
    rng = random.Random(7)
    master = open_store(small_config(str(tmp_path / "m")))
    slave = open_store(small_config(str(tmp_path / "s"), brokerRole="SLAVE"))
    reader = MessageStoreReader(small_config(str(tmp_path / "m")))
    arrivals: list[tuple[str, int, int]] = []
    slave.arrival_listener = lambda t, q, off, tc, now: arrivals.append((t, q, off))
    try:
        assert slave.commitlog.mfq.files == []  # a slave makes no file before the master's
        _fill(master, 400)  # several 16 KiB files
        assert len(master.commitlog.mfq.files) > 3
        start = master_start_offset(slave.commitlog.max_offset, master.max_phy_offset,
                                    master.cfg.mappedFileSizeCommitLog)  # fmt: skip
        end = _replicate(reader, slave, start, rng, 5_000)
        assert end == master.max_phy_offset == slave.commitlog.max_offset
        # an empty slave starts at the master's last file: it holds that file's messages only
        first = slave.commitlog.mfq.files[0].file_from_offset
        assert first == start > 0
        assert slave.state.max_phy == end
        for q in range(3):
            theirs = _bodies(slave, "T", q)
            assert theirs and theirs == _bodies(master, "T", q)[-len(theirs):]
        assert arrivals and arrivals[-1][0] == "T"
        _fill(master, 40, 9_000)
        end = _replicate(reader, slave, end, rng, 9_500)
        assert end == master.max_phy_offset
        assert slave.check() == []
        # byte for byte the master's log from where the slave started
        pos = start
        while pos < end:
            theirs = bytes(reader.get_commit_log_data(pos, 1 << 20) or b"")
            ours = bytes(slave.get_commit_log_data(pos, len(theirs)) or b"")
            assert theirs and ours == theirs, pos
            pos += len(theirs)
        assert not slave.append_to_commit_log(end - 1, b"x", 9_600)  # not its end
    finally:
        reader.close()
        slave.shutdown(10_000)
        master.shutdown(10_000)
    again = open_store(small_config(str(tmp_path / "s"), brokerRole="SLAVE"), 11_000)
    try:
        assert again.commitlog.max_offset == end and again.state.max_phy == end
        assert again.check() == []
    finally:
        again.shutdown(12_000)


@contextmanager
def _two_records_cut(tmp_path: Any, **slave_props: str) -> Iterator[tuple[Any, bytes, int]]:
    """A master with two records and a slave store; the master's bytes and a cut inside the
    second record."""
    master = open_store(small_config(str(tmp_path / "m")))
    slave = open_store(small_config(str(tmp_path / "s"), brokerRole="SLAVE", **slave_props))
    reader = MessageStoreReader(small_config(str(tmp_path / "m")))
    try:
        _fill(master, 2)
        data = bytes(reader.get_commit_log_data(0, 1 << 20) or b"")
        yield slave, data, len(data) - 10
    finally:
        reader.close()
        slave.shutdown(3_000)
        master.shutdown(3_000)


def test_partial_record_waits_for_the_rest(tmp_path: Any) -> None:
    with _two_records_cut(tmp_path) as (slave, data, cut):
        assert slave.append_to_commit_log(0, data[:cut], 2_000)
        assert slave.get_max_offset_in_queue("T", 1) == 0  # the second record is incomplete
        assert slave.state.max_phy < cut
        assert slave.append_to_commit_log(cut, data[cut:], 2_001)
        assert slave.get_max_offset_in_queue("T", 1) == 1
        assert slave.state.max_phy == len(data)


def test_one_append_gives_one_arrival_per_queue(tmp_path: Any) -> None:
    """The reput of many records notifies each queue (and tags code) once, with its new max,
    as a batch put does: not one notice per record."""
    master = open_store(small_config(str(tmp_path / "m")))
    slave = open_store(small_config(str(tmp_path / "s"), brokerRole="SLAVE"))
    reader = MessageStoreReader(small_config(str(tmp_path / "m")))
    arrivals: list[tuple[str, int, int, int]] = []
    slave.arrival_listener = lambda t, q, off, tc, now: arrivals.append((t, q, off, tc))
    try:
        _fill(master, 12)  # four records in each of three queues, all in the first file
        data = bytes(reader.get_commit_log_data(0, 1 << 20) or b"")
        assert slave.append_to_commit_log(0, data, 2_000)
        assert sorted((t, q, off) for t, q, off, _tc in arrivals) == [
            ("T", 0, 4), ("T", 1, 4), ("T", 2, 4)]  # fmt: skip
    finally:
        reader.close()
        slave.shutdown(3_000)
        master.shutdown(3_000)


def test_wire_units() -> None:
    assert master_start_offset(0, 5 * 1024 + 17, 1024) == 5 * 1024
    assert master_start_offset(777, 5 * 1024, 1024) == 777
    rd = ReportDecoder()
    assert rd.feed(REPORT.pack(5)[:3]) is None
    assert rd.feed(REPORT.pack(5)[3:] + REPORT.pack(9) + REPORT.pack(11)[:2]) == 9
    td = TransferDecoder()
    wire = HEADER.pack(100, 3) + b"abc" + HEADER.pack(103, 0) + HEADER.pack(103, 2) + b"d"
    assert td.feed(wire) == [(100, b"abc"), (103, b"")]
    assert td.pending == HEADER.size + 1
    assert td.feed(b"e") == [(103, b"de")]
    with pytest.raises(HAStreamError):  # a negative offset is refused
        TransferDecoder().feed(HEADER.pack(-1, 0))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=40))
def test_transfer_decoder_any_split(cuts: list[int]) -> None:
    frames = [(i * 10, bytes([i]) * (i % 5)) for i in range(20)]
    wire = b"".join(HEADER.pack(p, len(b)) + b for p, b in frames)
    td = TransferDecoder()
    got = []
    pos = 0
    for c in cuts:
        got += td.feed(wire[pos : pos + c])
        pos += c
    got += td.feed(wire[pos:])
    assert got == frames


def test_tick_index_on_a_slave_waits_for_whole_records(tmp_path: Any) -> None:
    """messageIndexDispatch=tick on a slave: the index follows the reput offset, so a record
    still arriving is indexed once whole, under its real keys."""
    with _two_records_cut(tmp_path, messageIndexDispatch="tick") as (slave, data, cut):
        assert slave.append_to_commit_log(0, data[:cut], 2_000)
        slave.dispatch_index(2_000)
        assert slave.query_message("T", "k1", 8, 0, 1 << 62).phy_offsets == []
        assert slave.append_to_commit_log(cut, data[cut:], 2_001)
        slave.dispatch_index(2_001)
        assert len(slave.query_message("T", "k1", 8, 0, 1 << 62).phy_offsets) == 1
        assert len(slave.query_message("T", "U000001", 8, 0, 1 << 62).phy_offsets) == 1
