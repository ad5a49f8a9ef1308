"""MappedFileQueue seen by a reader while the writer creates a segment (store/mapped_file.py)."""

from __future__ import annotations

import os
from pathlib import Path

from store.mapped_file_queue import MappedFileQueue

FILE_SIZE = 64 * 1024


def test_reader_never_maps_a_segment_that_is_still_being_created(tmp_path: Path) -> None:
    # The writer creates a segment in steps (O_CREAT, first page, ftruncate): a reader that
    # looks in between must not keep a short mapping (it would never see the rest).
    seg = tmp_path / f"{0:020d}"
    with open(seg, "wb") as f:
        f.write(bytes(4096))  # the first page only, as MappedFile does before ftruncate
    reader = MappedFileQueue(str(tmp_path), FILE_SIZE, writable=False)
    assert reader.load() is True
    assert reader.files == []  # not complete yet: left for a later refresh
    reader.refresh()
    assert reader.files == []

    os.truncate(seg, FILE_SIZE)
    with open(seg, "r+b") as f:
        f.seek(FILE_SIZE - 4)
        f.write(b"tail")
    reader.refresh()
    assert len(reader.files) == 1
    mv = reader.files[0].mv
    assert len(mv) == FILE_SIZE and bytes(mv[-4:]) == b"tail"


def test_reader_refresh_maps_a_segment_made_again_under_its_name(tmp_path) -> None:
    """A queue deleted and made again (a deleted topic's) must not be read through the old
    mapping of the unlinked file; a deleted directory drops every mapping."""
    import shutil

    path = str(tmp_path / "q")
    writer = MappedFileQueue(path, 4096, writable=True, warm=False)
    mf = writer.get_last_mapped_file(0)
    assert mf is not None
    mf.mm[0:3] = b"old"
    reader = MappedFileQueue(path, 4096, writable=False)
    reader.refresh()
    assert bytes(reader.files[0].mm[0:3]) == b"old"
    writer.close()
    shutil.rmtree(path)
    reader.refresh()
    assert reader.files == []  # the directory is gone
    reader.refresh()
    again = MappedFileQueue(path, 4096, writable=True, warm=False)
    mf = again.get_last_mapped_file(0)
    assert mf is not None
    mf.mm[0:3] = b"new"
    reader.refresh()
    assert [f.file_name for f in reader.files] == ["0" * 20]
    assert bytes(reader.files[0].mm[0:3]) == b"new"
    # the same name again while the reader still maps the previous file
    again.close()
    shutil.rmtree(path)
    third = MappedFileQueue(path, 4096, writable=True, warm=False)
    mf = third.get_last_mapped_file(0)
    assert mf is not None
    mf.mm[0:3] = b"3rd"
    reader.refresh()
    assert bytes(reader.files[0].mm[0:3]) == b"3rd"
    third.close()
    reader.close()


def test_a_full_file_is_flushed_whatever_least_pages_says(tmp_path) -> None:
    """flush_ranges(least_pages) skips a file with few dirty pages unless it is full
    (MappedFile.isAbleToFlush): a full file's tail would otherwise wait for a thorough round,
    and flushed_where would have to stop at it. flushed_where never passes a skipped file."""
    q = MappedFileQueue(str(tmp_path / "cq"), 4 * 4096, writable=True, warm=False)
    a = q.get_last_mapped_file(0)
    assert a is not None
    a.mm[0 : 4 * 4096 - 100] = b"a" * (4 * 4096 - 100)
    a.wrote_position = 4 * 4096 - 100
    assert q.flush_ranges(0)  # a flushed whole up to its wrote position
    a.mm[4 * 4096 - 100 : 4 * 4096] = b"t" * 100
    a.wrote_position = 4 * 4096  # one page dirty in a, which is now full
    b = q.get_last_mapped_file(4 * 4096)
    assert b is not None and b is not a
    b.mm[0:4096] = b"b" * 4096
    b.wrote_position = 4096  # one page dirty in b, not full
    assert q.flush_ranges(2) is False  # a flushed (full), b skipped (1 page < 2)
    assert a.flushed_position == 4 * 4096 and b.flushed_position == 0
    assert q.flushed_where == 4 * 4096  # up to a's end, not past the skipped b
    q.flush(0)  # what a clean shutdown runs: b's page too
    assert b.flushed_position == 4096
    q.close()


def test_create_makes_the_segment_under_the_next_lock(tmp_path, monkeypatch) -> None:
    """The writer's take-or-create of a segment runs under next_lock, so the allocate thread
    cannot make the same segment at the same time."""
    from store import mapped_file, mapped_file_queue

    q = MappedFileQueue(str(tmp_path / "cl"), 4096, writable=True, warm=False)
    real = mapped_file.MappedFile
    held: list[bool] = []

    def spy(*args, **kwargs):
        held.append(q.next_lock.locked())
        return real(*args, **kwargs)

    monkeypatch.setattr(mapped_file_queue, "MappedFile", spy)
    first = q.get_last_mapped_file(0)
    assert first is not None
    first.wrote_position = 4096  # full: the next one is made (none was preallocated)
    assert q.get_last_mapped_file(4096) is not first
    assert held == [True, True]
    monkeypatch.setattr(mapped_file_queue, "MappedFile", real)
    q.close()
