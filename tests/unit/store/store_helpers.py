"""Shared helpers for the store tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from store.config import StoreConfig
from store.get_message_result import GetMessageStatus
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.message_store import DefaultMessageStore
from store.message_store_reader import MessageStoreReader


def small_config(root: str, **kw: object) -> StoreConfig:
    """A store config with tiny files so tests roll often."""
    base: dict[str, object] = dict(
        storePathRootDir=root,
        mappedFileSizeCommitLog=16 * 1024,
        mappedFileSizeConsumeQueue=20 * 64,
        maxHashSlotNum=32,
        maxIndexNum=64,
        totalPhysicalMemory=1 << 30,
    )
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def open_store(cfg: StoreConfig, now_ms: int = 1_000) -> DefaultMessageStore:
    """Load and start a writer."""
    s = DefaultMessageStore(cfg)
    s.load(now_ms)
    s.start(now_ms)
    return s


def msg(
    topic: str = "T",
    body: bytes = b"hello",
    qid: int = 0,
    tags: str | None = "A",
    keys: str | None = None,
    uniq: str | None = None,
    **props: str,
) -> MessageExtBrokerInner:
    """Build a message."""
    p = dict(props)
    if tags:
        p["TAGS"] = tags
    if keys:
        p["KEYS"] = keys
    if uniq:
        p["UNIQ_KEY"] = uniq
    return MessageExtBrokerInner(
        topic=topic, body=body, properties=p, queue_id=qid, born_timestamp=1
    )


def fill_keyed(s: DefaultMessageStore, n: int, start_ms: int = 1_000, tag: str = "") -> list[int]:
    """Put n messages with keys "<tag>k<i> common" and UNIQ_KEY "<tag>U<i:06d>"; phy offsets."""
    phys = []
    for i in range(n):
        r = s.put_message(
            msg(keys=f"{tag}k{i} common", uniq=f"{tag}U{i:06d}", qid=i % 2), start_ms + i
        )
        assert r.ok
        phys.append(r.wrote_offset)
    return phys


def split_records(buf: bytes) -> list[tuple[int, bytes]]:
    """(queue_offset, body) of each record in a pull buffer."""
    from protocol.record import decode_record_fields

    out = []
    pos = 0
    while pos < len(buf):
        f = decode_record_fields(buf, pos)
        out.append((f.queue_offset, bytes(f.body)))
        pos += f.total_size
    return out


def pull_all(
    s: DefaultMessageStore | MessageStoreReader, topic: str, qid: int, max_pulls: int
) -> list[tuple[int, bytes]]:
    """(queue_offset, body) of every record from queue offset 0, in at most max_pulls pulls."""
    out: list[tuple[int, bytes]] = []
    off = 0
    for _ in range(max_pulls):
        res = s.get_message("g", topic, qid, off, 32)
        if res.status is not GetMessageStatus.FOUND:
            break
        out += split_records(res.buffer)
        off = res.next_begin_offset
        res.release()
    return out


class GatedCall:
    """Wraps a libc range call (msync, madvise) of a store thread so the test can hold it inside
    the call: `inside` is set when the thread entered, the call returns once `gate` is set."""

    def __init__(self, real: Callable[[int, int, int], int]) -> None:
        self.real = real
        self.inside = threading.Event()
        self.gate = threading.Event()

    def __call__(self, addr: int, n: int, flags: int) -> int:
        self.inside.set()
        self.gate.wait(10)
        return self.real(addr, n, flags)
