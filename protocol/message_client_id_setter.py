"""UNIQ_KEY message ids: common/message/MessageClientIDSetter.java, RocketMQ 4.9.x.

An id is the host ip, the pid (short), a class-loader hash (int), the ms since the start of the
month and a counter, in upper hex; its time part reads back relative to a month.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import os
import random
import socket
import time

log = logging.getLogger(__name__)


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """(start of this month, start of next month) in epoch ms, local time."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000.0)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


def _local_ip() -> bytes:
    """This host's IPv4 address as 4 bytes (127.0.0.1 when it cannot be found)."""
    try:
        addr = socket.gethostbyname(socket.gethostname())
        if not addr.startswith("127."):
            return socket.inet_aton(addr)
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET: no packet is sent for a UDP connect
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        return b"\x7f\x00\x00\x01"


class UniqIdGenerator:
    """UNIQ_KEY ids: ip, pid (short), class-loader hash (int), ms since month start, counter."""

    __slots__ = ("_counter", "_next_start", "_prefix", "_start")

    def __init__(self, ip: bytes, pid: int, class_loader_hash: int, counter_start: int = 0):
        if len(ip) not in (4, 16):
            raise ValueError("ip must be 4 or 16 bytes")
        self._prefix = (
            ip.hex() + f"{pid & 0xFFFF:04x}{class_loader_hash & 0xFFFFFFFF:08x}"
        ).upper()
        self._counter = itertools.count(counter_start)
        self._start = 0
        self._next_start = 0

    @property
    def prefix(self) -> str:
        """The fixed hex prefix (ip, pid, class-loader hash)."""
        return self._prefix

    def next_id(self, now_ms: int | None = None) -> str:
        """The next id; now_ms defaults to the wall clock."""
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        if now_ms >= self._next_start or now_ms < self._start:
            self._start, self._next_start = _month_start_ms(now_ms)
        diff = now_ms - self._start
        return f"{self._prefix}{diff & 0xFFFFFFFF:08X}{next(self._counter) & 0xFFFF:04X}"


class _ProcessUniqIdGenerator(UniqIdGenerator):
    """The per-process default generator (re-created after fork)."""

    __slots__ = ("pid",)

    def __init__(self) -> None:
        self.pid = os.getpid()
        super().__init__(_local_ip(), self.pid, random.getrandbits(32))


_default_generator: _ProcessUniqIdGenerator | None = None


def create_uniq_id(now_ms: int | None = None) -> str:
    """A new UNIQ_KEY for this process (32 upper hex chars for an IPv4 host)."""
    global _default_generator
    gen = _default_generator
    if gen is None or gen.pid != os.getpid():
        gen = _default_generator = _ProcessUniqIdGenerator()
    return gen.next_id(now_ms)


def uniq_id_time_ms(uniq_id: str, now_ms: int | None = None) -> int:
    """Approximate store time encoded in an IPv4 UNIQ_KEY, relative to the month of now_ms."""
    if len(uniq_id) != 32:
        raise ValueError("only 32-char (IPv4) uniq ids carry a parsable time")
    diff = int(uniq_id[20:28], 16)
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    start, _ = _month_start_ms(now_ms)
    return start + diff
