"""MappedFileQueue seen by a reader while the writer creates a segment (store/mapped_file.py)."""

from __future__ import annotations

import os
from pathlib import Path

from store.mapped_file import MappedFileQueue

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
