"""IndexFile.put_hash_batch against a one-entry-at-a-time reference of IndexFile.putKey."""

from __future__ import annotations

import os
import struct
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from store.index import INDEX_HEADER_SIZE, IndexFile

SLOTS = 7
INDEX_NUM = 40


def _reference(buf: bytearray, hashes, phys, tss, begin_ts: int, count: int) -> tuple[int, int]:
    """Entries added one by one as IndexFile.putKey does; returns (slot count, index count)."""
    slot_count = 0
    base = INDEX_HEADER_SIZE + SLOTS * 4
    for kh, phy, ts in zip(hashes, phys, tss, strict=True):
        if count >= INDEX_NUM:
            break
        slot_pos = INDEX_HEADER_SIZE + (kh % SLOTS) * 4
        prev = struct.unpack_from(">i", buf, slot_pos)[0]
        if prev <= 0 or prev >= count:
            prev = 0
            slot_count += 1
        diff = 0 if begin_ts <= 0 else min(max((ts - begin_ts) // 1000, 0), 0x7FFFFFFF)
        struct.pack_into(">iqii", buf, base + count * 20, kh, phy, diff, prev)
        struct.pack_into(">i", buf, slot_pos, count)
        count += 1
    return slot_count, count


batches_st = st.lists(
    st.lists(
        st.tuples(
            st.integers(0, 2**31 - 1),  # key hash (abs of Java's)
            st.integers(0, 2**40),  # phy offset
            st.sampled_from([0, 1_000, 5_500, 10**13, -5_000]),  # store time
        ),
        max_size=30,
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=50, deadline=None)
@given(batches_st)
def test_put_hash_batch_matches_one_by_one(batches) -> None:
    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(os.path.join(d, "idx"), SLOTS, INDEX_NUM)
        ref = bytearray(f.file_size)
        count = 1
        slot_count = 0
        begin_ts = 0
        for batch in batches:
            hashes = [b[0] for b in batch]
            phys = [b[1] for b in batch]
            tss = [b[2] for b in batch]
            if count <= 1 and batch:
                begin_ts = tss[0]
            added = f.put_hash_batch(hashes, phys, tss, 0) if batch else 0
            sc, new_count = _reference(ref, hashes, phys, tss, begin_ts, count)
            assert added == new_count - count
            slot_count += sc
            count = new_count
            assert f.index_count == count and f.slot_count == slot_count
            entries = slice(INDEX_HEADER_SIZE, f.file_size)
            assert bytes(f.mm[entries]) == bytes(ref[entries])
        f.close()


def test_put_hash_batch_from_an_offset_stops_when_full() -> None:
    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(os.path.join(d, "idx"), SLOTS, INDEX_NUM)
        hashes = list(range(100, 160))
        phys = list(range(60))
        tss = [2_000 + 1_000 * i for i in range(60)]
        assert f.put_hash_batch(hashes, phys, tss, 5) == INDEX_NUM - 1
        assert f.index_count == INDEX_NUM and f.end_phy == phys[5 + INDEX_NUM - 2]
        ref = bytearray(f.file_size)
        _reference(ref, hashes[5:], phys[5:], tss[5:], tss[5], 1)
        assert bytes(f.mm[INDEX_HEADER_SIZE:]) == bytes(ref[INDEX_HEADER_SIZE:])
        assert f.put_hash_batch(hashes, phys, tss, 0) == 0
        f.close()


def test_truncate_keeps_the_older_entries_of_a_chain_reachable() -> None:
    """Truncating from a phy offset unlinks the removed entries from their slots; entries of
    the same key below the cut stay reachable (the slot went to 0 when the next entry down the
    chain was removed too, losing the kept ones from every query by that key)."""
    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(os.path.join(d, "20260101000000000"), SLOTS, INDEX_NUM)
        try:
            kh = 12345
            other = kh + 1  # another slot, its entries interleaved
            hashes = [kh, other, kh, other, kh]
            phys = [100, 150, 200, 250, 300]
            assert f.put_hash_batch(hashes, phys, [1_000] * 5, 0) == 5
            found: list[int] = []
            f.select_phy_offsets(kh, 10, 0, 10**13, found)
            assert found == [300, 200, 100]
            f.truncate_from_phy(200)  # 200, 250 and 300 go
            found = []
            f.select_phy_offsets(kh, 10, 0, 10**13, found)
            assert found == [100]
            found = []
            f.select_phy_offsets(other, 10, 0, 10**13, found)
            assert found == [150]
            assert f.slot_count == 2
        finally:
            f.close()
