"""The state DefaultMessageStore's parts share (store/DefaultMessageStore.java, RocketMQ 4.9.x).

DefaultMessageStore is assembled from one mixin per RocketMQ service (append, reput, recovery,
clean); this base only declares, for the type checker, the fields and methods they use of one
another. DefaultMessageStore.__init__ sets every field.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

from store.allocate_service import FileDeleter
from store.checkpoint import StoreCheckpoint
from store.consume_queue import ConsumeQueue
from store.create_retry_gate import CreateRetryGate
from store.index_dispatch import IndexDispatcher
from store.message_store_read import StoreReadMixin
from store.running_flags import RunningFlags
from store.state_page import StatePage


class MessageStoreFields(StoreReadMixin):
    """Declarations only: what the writer's mixins read and write of DefaultMessageStore."""

    root: str
    cq_root: str
    consume_queues: dict[tuple[str, int], ConsumeQueue]
    topic_queue_table: dict[tuple[str, int], int]
    checkpoint: StoreCheckpoint | None
    state: StatePage | None
    arrival_listener: Callable[[str, int, int, int, int], None] | None
    disk_usage: Callable[[str], float]
    put_times_total: int
    put_size_total: int
    _running: bool
    _accepting: bool
    _slave: bool
    running_flags: RunningFlags
    _create_gate: CreateRetryGate
    _index_retry_ms: int
    _topic_cache: dict[str, tuple[bytes, bytes, int]]
    _tags_cache: dict[bytes, int]
    _tag_memo: dict[int, tuple[bytes, int, int]]
    _unpack_memo: tuple[int, Any]
    _delays: list[int]
    _reput_offset: int
    _max_msg_size: int
    _index_mode: str
    _index_inline: bool
    _deleter: FileDeleter
    _index_disp: IndexDispatcher | None
    _index_proc: subprocess.Popen[bytes] | None
    _index_lock_fd: int | None
    # methods of one mixin (or DefaultMessageStore) another calls
    _on_new_file: Callable[[], None]
    _publish: Callable[[], None]
    _published_max: Callable[[], int]
    _topic_info: Callable[[str], tuple[bytes, bytes, int] | None]
    _find_or_create_cq: Callable[[str, int], ConsumeQueue]
    _dispatch: Callable[..., None]
    note_create_failed: Callable[[int, OSError], None]
    note_files_created: Callable[[], None]
