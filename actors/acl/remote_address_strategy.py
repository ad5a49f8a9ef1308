"""Which remote addresses a white-list entry of plain_acl.yml admits.

Mirrors acl/plain/RemoteAddressStrategyFactory.java (and the address helpers of AclUtils),
RocketMQ 4.9.x. The forms, for IPv4 and IPv6 alike:

    ""                           nothing (a blank entry admits no one)
    "*", "*.*.*.*", "*:*:*:*:*:*:*:*"   everyone
    "192.168.0.{1,2}"            the listed last parts
    "192.168.0.1,192.168.0.2"    the listed addresses
    "192.168.1.*", "192.168.*", "192.168.1.1-20"   a range in one part, parts after it free
    "192.168.0.1", "::1"         one address

A malformed entry raises AclError with Java's message, as loading the file does in Java.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final, Protocol


class AclError(Exception):
    """org.apache.rocketmq.acl.common.AclException: a request refused, or a bad ACL entry."""

    JAVA_NAME: Final = "org.apache.rocketmq.acl.common.AclException"

    def remark(self) -> str:
        """The remark a Java broker answers (exceptionSimpleDesc without its stack frame)."""
        return f"{self.JAVA_NAME}: {self}"


class RemoteAddressStrategy(Protocol):
    """One white-list entry."""

    def match(self, addr: str) -> bool:
        """Whether the remote address (no port) is admitted."""
        ...


def _is_v4(s: str) -> bool:
    parts = s.split(".")
    return len(parts) == 4 and all(p.isdigit() and len(p) <= 3 and int(p) <= 255 for p in parts)


def _is_v6(s: str) -> bool:
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def expand_ip(addr: str, parts: int) -> str:
    """AclUtils.expandIP: '::' widened to `parts` groups, each group 4 upper-case hex digits."""
    addr = addr.upper()
    pad = parts - addr.count(":")
    if pad > 0:
        addr = addr.replace("::", ":" * (pad + 1), 1) if "::" in addr else addr
    return ":".join(g.rjust(4, "0") for g in addr.split(":"))


@dataclass(frozen=True)
class _Everyone:
    def match(self, addr: str) -> bool:
        return True


@dataclass(frozen=True)
class _NoOne:
    def match(self, addr: str) -> bool:
        return False


@dataclass(frozen=True)
class _Listed:
    addrs: frozenset[str]

    def match(self, addr: str) -> bool:
        if _is_v6(addr):
            addr = expand_ip(addr, 8)
        return addr in self.addrs


@dataclass(frozen=True)
class _One:
    addr: str

    def match(self, addr: str) -> bool:
        return expand_ip(addr, 8).upper() == expand_ip(self.addr, 8).upper()


@dataclass(frozen=True)
class _Range:
    head: str
    index: int  # which part the range is in (IPv4: 1..3; IPv6: 1..7)
    start: int
    end: int
    v6: bool

    def match(self, addr: str) -> bool:
        if not self.v6 and _is_v4(addr):
            if not addr.startswith(self.head):
                return False
            value = addr.split(".")[self.index]
            return self.start <= int(value) <= self.end
        if self.v6 and _is_v6(addr):
            full = expand_ip(addr, 8).upper()
            if not full.startswith(self.head):
                return False
            value = full[5 * self.index : 5 * self.index + 4]
            return self.start <= int(value, 16) <= self.end
        return False


def _bad(entry: str) -> AclError:
    return AclError(f"Netaddress examine Exception netaddress is {entry}")


def _listed(addrs: list[str], entry: str) -> _Listed:
    out = set()
    for a in addrs:
        if _is_v4(a):
            out.add(a)
        elif _is_v6(a):
            out.add(expand_ip(a, 8))
        else:
            raise _bad(a)
    return _Listed(frozenset(out))


def _part_range(value: str, v6: bool, entry: str) -> tuple[int, int] | None:
    """A part of a range entry: its (start, end), or None for an exact part."""
    value = value.strip()
    top = 0xFFFF if v6 else 255
    if value == "*":
        return 0, top
    if "-" in value:
        if value.startswith("-"):
            raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception "
                           f"value {value} ")  # fmt: skip
        lo_s, _, hi_s = value.partition("-")
        try:
            lo, hi = (int(lo_s, 16), int(hi_s, 16)) if v6 else (int(lo_s), int(hi_s))
        except ValueError:
            raise _bad(entry) from None
        if not (0 <= lo <= hi <= top):
            raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception "
                           f"start is {lo} , end is {hi}")  # fmt: skip
        return lo, hi
    return None


def _range(entry: str) -> _Range:
    v6 = ":" in entry
    parts = [p for p in entry.split(":" if v6 else ".") if p]
    if not v6 and len(parts) != 4 and not entry.endswith("*"):
        raise _bad(entry)
    for i in range(1, len(parts)):
        got = _part_range(parts[i], v6, entry)
        if got is None:
            continue
        for p in parts[:i]:  # the parts before the range are exact numbers
            try:
                ok = 0 <= int(p, 16 if v6 else 10) <= (0xFFFF if v6 else 255)
            except ValueError:
                ok = False
            if not ok:
                raise AclError(f"Netaddress examine scope Exception netaddress is {entry}")
        if v6:
            head = expand_ip(":".join(parts[:i]), i)
            return _Range(head + ":", i, got[0], got[1], True)
        return _Range(".".join(p.strip() for p in parts[:i]) + ".", i, got[0], got[1], False)
    raise _bad(entry)


def remote_address_strategy(entry: str | None) -> RemoteAddressStrategy:
    """getRemoteAddressStrategy for one white-list entry."""
    if entry is None or not entry.strip():
        return _NoOne()
    if entry in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _Everyone()
    if entry.endswith("}"):
        brace = entry.find("{")
        if brace < 0:
            raise AclError(f"MultipleRemoteAddressStrategy netaddress examine scope Exception "
                           f"netaddress {entry}")  # fmt: skip
        if ":" not in entry and len(entry.split(".")) < 4:
            raise AclError(f"MultipleRemoteAddressStrategy has got a/some wrong format IP(s) "
                           f"{entry}")  # fmt: skip
        prefix, lasts = entry[:brace], entry[brace + 1 : -1]
        return _listed([prefix + p for p in lasts.split(",") if p], entry)
    if "," in entry:
        return _listed([p for p in entry.split(",") if p], entry)
    if "*" in entry or "-" in entry:
        return _range(entry)
    if not (_is_v4(entry) or _is_v6(entry)):
        raise _bad(entry)
    return _One(entry)
