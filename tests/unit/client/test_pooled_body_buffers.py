"""The pooled pull-answer body buffers (actors.client.consumer.pooled_body_buffers) with the
decoder's lazy records over them (message_decoder): a buffer comes back once its records are
freed or decoded and is read into again; a buffer anything else still refers to is never
reused; the pool keeps no more than it should; and, with threads freeing and decoding
records while another thread overwrites every buffer it takes, no record ever reads
another answer's bytes."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

import pytest

from actors.client.consumer import pooled_body_buffers as pool
from actors.client.consumer.message_decoder import decode_pull_messages
from actors.client.records import MessageExt
from protocol.bodies import MessageQueue
from protocol.message import MessageExt as WireMessageExt
from protocol.message import encode_message_ext
from protocol.record import pack_host

MQ = MessageQueue("PoolTopic", "broker-a", 1)
HOST = pack_host("127.0.0.1", 10911)


@pytest.fixture(autouse=True)
def empty_pool() -> Iterator[None]:
    pool._offered.clear()  # one pool per process: each test starts from none offered
    yield
    pool._offered.clear()


def _body(first: int, n: int = 32, size: int = 1000) -> bytes:
    """A pull body of n records, offsets first.., each body `size` bytes naming its offset."""
    return b"".join(encode_message_ext(WireMessageExt(
        topic=MQ.topic, body=(b"%08d" % (first + i)) * (size // 8), queue_id=MQ.queue_id,
        queue_offset=first + i, commit_log_offset=1000 * (first + i), born_host=HOST,
        store_host=HOST, properties={"KEYS": f"k{first + i}", "UNIQ_KEY": f"U{first + i}"},
    )) for i in range(n))  # fmt: skip


def _read(raw: bytes) -> bytearray:
    """What the reader does: a body buffer taken from the pool, the frame's body in it."""
    buf = pool.take(len(raw))
    buf[:] = raw  # same length: in place
    return buf


def test_a_buffer_whose_records_are_gone_is_read_into_again() -> None:
    raw = _body(0)
    buf = _read(raw)
    msgs = decode_pull_messages(buf, MQ, None, 0, 99)
    assert [m.queue_offset for m in msgs] == list(range(32))
    first = id(buf)
    del buf
    assert pool.offered() == 0  # the records hold its lease
    del msgs
    assert pool.offered() == 1
    again = pool.take(len(raw) - 500)  # a smaller frame: the same buffer, cut in place
    assert id(again) == first and len(again) == len(raw) - 500
    del again  # no records: not offered (only a lease offers a buffer)
    assert pool.offered() == 0


def test_decoded_records_let_their_buffer_go_and_keep_their_values() -> None:
    raw = _body(100)
    buf = _read(raw)
    msgs = decode_pull_messages(buf, MQ, None, 100, 199)
    del buf
    keys = [m.keys for m in msgs]  # the first header read decodes each record whole
    assert keys == [f"k{100 + i}" for i in range(32)]
    assert pool.offered() == 1  # decoded: nothing refers to the buffer now
    other = _read(_body(500))  # the next answer overwrites it
    assert all(type(m) is MessageExt for m in msgs)
    assert [m.body[:8] for m in msgs] == [b"%08d" % (100 + i) for i in range(32)]
    assert [m.msg_id for m in msgs] == [f"U{100 + i}" for i in range(32)]
    assert [m.commitlog_offset for m in msgs] == [1000 * (100 + i) for i in range(32)]
    del other


def test_a_buffer_still_referred_to_is_never_reused() -> None:
    raw = _body(0, n=8)
    buf = _read(raw)
    msgs = decode_pull_messages(buf, MQ, None, 0, 99)
    view = memoryview(buf)  # e.g. an answer still being handled
    del buf, msgs
    assert pool.offered() == 1  # offered: the records are gone
    taken = pool.take(len(raw))
    assert taken is not view.obj
    assert pool.offered() == 0  # looked at, found referred to, let go
    taken[:] = b"\xee" * len(raw)
    assert bytes(view) == raw  # untouched
    view.release()


def test_the_pool_keeps_only_buffers_of_pooled_sizes_up_to_its_bound() -> None:
    small = _body(0, n=1, size=100)  # under BUF_MIN: a buffer of its own, never offered
    assert len(small) < pool.BUF_MIN
    msgs = decode_pull_messages(_read(small), MQ, None, 0, 9)
    del msgs
    assert pool.offered() == 0
    raw = _body(0, n=8)
    batches = [decode_pull_messages(_read(raw), MQ, None, 0, 99)
               for _ in range(pool.POOL_MAX + 5)]  # fmt: skip
    del batches
    assert pool.offered() == pool.POOL_MAX
    assert len({id(pool.take(len(raw))) for _ in range(pool.POOL_MAX)}) == pool.POOL_MAX
    big = bytearray(pool.BUF_MAX + 1)  # over BUF_MAX: freed, not kept
    lease = pool.Lease(big)
    del big, lease
    assert pool.offered() == 0


@pytest.mark.parametrize("seed", range(4))
def test_threads_freeing_and_decoding_records_never_see_a_reused_buffer(seed: int) -> None:
    """One thread reads answers into taken buffers, overwriting each buffer whole with the
    answer's bytes (a reused buffer's old bytes are gone at once) and hands the records
    out; four threads keep them a while, read some header fields (decoding them) or none,
    and free them in random order. Every field every thread reads is its own record's."""
    rnd = random.Random(seed)
    outbox: list[list[MessageExt]] = []
    lock = threading.Lock()
    done = threading.Event()
    errors: list[str] = []

    def consumer(k: int) -> None:
        r = random.Random(seed * 10 + k)
        held: list[MessageExt] = []
        deadline = time.monotonic() + 30
        for _ in range(1_000_000):  # bounded in count and time
            if time.monotonic() > deadline:
                break
            with lock:
                got = outbox.pop() if outbox else None
            if got is not None:
                held += got
            elif not held:
                if done.is_set():
                    return
                time.sleep(0.0002)  # nothing handed out yet
                continue
            if held and (r.random() < 0.5 or got is None):
                m = held.pop(r.randrange(len(held)))
                off = m.queue_offset
                if m.body[:8] != b"%08d" % off:
                    errors.append(f"body of {off}")
                if r.random() < 0.5 and (m.keys != f"k{off}" or
                                         m.commitlog_offset != 1000 * off):  # fmt: skip
                    errors.append(f"header of {off}")
        errors.append(f"consumer {k} did not finish")

    threads = [threading.Thread(target=consumer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    offered = 0  # takes that found a buffer offered back
    try:
        for batch in range(300):
            raw = _body(batch * 8, n=8, size=rnd.choice([600, 1000, 1400]))
            for _ in range(2000):  # the last answer taken first (bounded: 2 s), so a loaded
                with lock:  # host's scheduling cannot starve the threads that free records
                    if not outbox:
                        break
                time.sleep(0.001)
            offered += pool.offered() > 0
            buf = pool.take(len(raw))
            buf[:] = b"\xee" * len(buf)  # whatever was there is gone
            buf[:] = raw
            msgs = decode_pull_messages(buf, MQ, None, 0, 10**6)
            del buf
            with lock:
                outbox.append(msgs)
            del msgs
    finally:
        done.set()
        for t in threads:
            t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert offered > 100  # buffers did come back while records of others were alive
