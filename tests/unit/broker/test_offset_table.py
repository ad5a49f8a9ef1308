"""The shared consumer offset table (actors/broker/offsets.py): one table, many processes."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from actors.broker.offsets import (
    ConsumerOffsetManager,
    OffsetTable,
    OffsetTableFull,
    offset_table_path,
)


def _shared(tmp_path: object) -> tuple[ConsumerOffsetManager, ConsumerOffsetManager]:
    """A maker (the controller) and an attached user (a processor) of one table."""
    path = offset_table_path(str(tmp_path))
    maker = ConsumerOffsetManager()
    assert maker.share(path) is True
    user = ConsumerOffsetManager()
    user.attach(path)
    return maker, user


def test_commit_in_one_is_read_in_the_other_at_once(tmp_path: object) -> None:
    maker, user = _shared(tmp_path)
    user.commit_offset("G", "T", 0, 7)  # a new entry, made by the user
    assert maker.query_offset("G", "T", 0) == 7
    maker.commit_offset("G", "T", 0, 9)  # the same entry, found through the directory
    assert user.query_offset("G", "T", 0) == 9
    assert user.query_offset("G", "T", 1) == -1 and user.query_offset("X", "T", 0) == -1
    maker.commit_offset("G", "T", 3, 0)
    assert user.table == {"T@G": {0: 9, 3: 0}}
    assert json.loads(user.encode()) == {"offsetTable": {"T@G": {"0": 9, "3": 0}}}


def test_removed_offsets_read_absent_and_come_back_on_commit(tmp_path: object) -> None:
    maker, user = _shared(tmp_path)
    for topic in ("T1", "T2"):
        user.commit_offset("G", topic, 0, 5)
        user.commit_offset("H", topic, 0, 6)
    assert maker.remove_group("G") == 2
    assert user.query_offset("G", "T1", 0) == -1 and user.topics_of_group("G") == set()
    assert user.topics_of_group("H") == {"T1", "T2"}
    assert maker.remove_topic("T1") == 1  # H's; G's was gone already
    assert user.table == {"T2@H": {0: 6}}
    user.commit_offset("G", "T1", 0, 1)  # the old entry is reused
    assert maker.table == {"T1@G": {0: 1}, "T2@H": {0: 6}}
    assert maker.remove_group("nobody") == 0


def test_negative_offsets_are_kept_as_committed(tmp_path: object) -> None:
    maker, user = _shared(tmp_path)
    user.commit_offset("G", "T", 0, -1)
    assert maker.table == {"T@G": {0: -1}}


def test_fingerprint_follows_every_change(tmp_path: object) -> None:
    maker, user = _shared(tmp_path)
    first = maker.fingerprint()
    user.commit_offset("G", "T", 0, 1)
    second = maker.fingerprint()
    assert second != first
    user.commit_offset("G", "T", 0, 1)
    assert maker.fingerprint() == second  # the same value again: nothing to write
    user.commit_offset("G", "T", 0, 2)
    assert maker.fingerprint() != second


def test_share_keeps_this_runs_table_and_replaces_a_broken_one(tmp_path: object) -> None:
    path = offset_table_path(str(tmp_path))
    first = ConsumerOffsetManager()
    first.commit_offset("G", "T", 0, 3)  # held while private: carried into the new table
    assert first.share(path) is True
    assert first.query_offset("G", "T", 0) == 3
    again = ConsumerOffsetManager()  # a restarted controller of the same run
    assert again.share(path) is False
    assert again.query_offset("G", "T", 0) == 3
    with open(path, "r+b") as f:
        f.write(b"\0" * 8)  # magic gone
    fresh = ConsumerOffsetManager()
    assert fresh.share(path) is True and fresh.table == {}


def test_attach_refuses_what_is_not_a_table(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "junk")
    with open(path, "wb") as f:
        f.write(b"x" * 100)
    with pytest.raises(OSError):
        ConsumerOffsetManager().attach(path)


def test_a_full_table_refuses_loudly(tmp_path: object) -> None:
    path = offset_table_path(str(tmp_path))
    t = OffsetTable(path, create=True, capacity=2)
    t.add("T@G", 0, 1)
    t.add("T@G", 1, 1)
    assert t.add("T@G", 0, 5) == 0  # an existing entry needs no room
    with pytest.raises(OffsetTableFull):
        t.add("T@G", 2, 1)


def _commit_many(path: str, who: int, n: int) -> None:
    m = ConsumerOffsetManager()
    m.attach(path)
    for i in range(n):
        m.commit_offset(f"G{who}", "T", i, i + 1)  # this process's own entries
        m.commit_offset("Both", "T", i, 1000 * who + i)  # entries both processes make
    os._exit(0)


def test_processes_adding_entries_at_once_share_one_directory(tmp_path: object) -> None:
    path = offset_table_path(str(tmp_path))
    maker = ConsumerOffsetManager()
    maker.share(path)
    ctx = multiprocessing.get_context("fork")
    n = 3000
    procs = [ctx.Process(target=_commit_many, args=(path, who, n)) for who in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    table = maker.table
    assert table["T@G1"] == {i: i + 1 for i in range(n)}
    assert table["T@G2"] == {i: i + 1 for i in range(n)}
    both = table["T@Both"]
    assert sorted(both) == list(range(n))  # one entry per queue, whoever made it first
    assert all(v in (1000 + q, 2000 + q) for q, v in both.items())
    entries = list(maker._t.entries())
    assert len(entries) == 3 * n == len({(k, q) for k, q, _ in entries})
