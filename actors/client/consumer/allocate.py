"""Queue allocation strategies: client/consumer/rebalance/* of RocketMQ 4.9.x.

AllocateMessageQueueAveragely ("AVG"), AllocateMessageQueueAveragelyByCircle ("AVG_BY_CIRCLE"),
AllocateMessageQueueConsistentHash ("CONSISTENT_HASH", common/consistenthash's MD5 ring),
AllocateMessageQueueByConfig ("CONFIG"), AllocateMessageQueueByMachineRoom ("MACHINE_ROOM") and
AllocateMachineRoomNearby ("MACHINE_ROOM_NEARBY-<inner>"), with the results of the Java classes
to the queue: every member of a consumer group computes its own share, so a Python member beside
Java / Node / C++ members must split the queues exactly as they do. Pure functions of their
inputs; RebalanceImpl sorts both lists (java_sort_key) before calling them, as Java does.
"""

from __future__ import annotations

import hashlib
import logging
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)


class QueueLike(Protocol):
    """What a strategy reads of a MessageQueue."""

    @property
    def topic(self) -> str: ...

    @property
    def broker_name(self) -> str: ...

    @property
    def queue_id(self) -> int: ...


Q = TypeVar("Q", bound=QueueLike)


def java_str_key(s: str) -> bytes:
    """Sort key ordering strings as Java's String.compareTo does (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def java_sort_key(mq: QueueLike) -> tuple[bytes, bytes, int]:
    """MessageQueue.compareTo: topic, then broker name, then queue id."""
    return java_str_key(mq.topic), java_str_key(mq.broker_name), mq.queue_id


def queue_to_string(mq: QueueLike) -> str:
    """MessageQueue.toString(), the key the consistent-hash ring routes by."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def java_split(s: str, sep: str) -> list[str]:
    """String.split(sep) for a one-character literal separator (trailing empties removed)."""
    parts = s.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if parts == [""] and s:  # "@@".split("@") is an empty array in Java
        return []
    return parts


class AllocateMessageQueueStrategy(Protocol):
    """One allocation strategy (Java's AllocateMessageQueueStrategy)."""

    @property
    def name(self) -> str: ...

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]: ...  # fmt: skip


def check(group: str, current_cid: str, mq_all: Sequence[QueueLike],
          cid_all: Sequence[str]) -> bool:  # fmt: skip
    """AbstractAllocateMessageQueueStrategy.check: False when this client is not in the group."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    if current_cid not in cid_all:
        log.info("consumer group %s: %s is not in the consumer list %s", group, current_cid,
                 cid_all)  # fmt: skip
        return False
    return True


class AllocateMessageQueueAveragely:
    """Contiguous blocks; the first (queues mod consumers) consumers get one more."""

    name = "AVG"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:  # fmt: skip
        """This consumer's share."""
        if not check(group, current_cid, mq_all, cid_all):
            return []
        n, m = len(mq_all), len(cid_all)
        index = cid_all.index(current_cid)
        mod = n % m
        big = mod > 0 and index < mod  # one of the consumers that take one more
        size = 1 if n <= m else n // m + 1 if big else n // m
        start = index * size if big else index * size + mod
        return [mq_all[(start + i) % n] for i in range(min(size, n - start))]


class AllocateMessageQueueAveragelyByCircle:
    """Queue i goes to consumer i mod consumers."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:  # fmt: skip
        """This consumer's share."""
        if not check(group, current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        return list(mq_all[index :: len(cid_all)])


def md5_hash(key: str) -> int:
    """ConsistentHashRouter's default hash: the first 4 MD5 bytes, unsigned big-endian."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8", "surrogatepass")).digest()[:4], "big")


class AllocateMessageQueueConsistentHash:
    """A ring of virtual nodes "<cid>-<i>"; a queue goes to the first node at or after its hash."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_count: int = 10,
                 hash_function: Callable[[str], int] | None = None) -> None:  # fmt: skip
        if virtual_node_count < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_count}")
        self.virtual_node_count = virtual_node_count
        self.hash_function = hash_function or md5_hash

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:  # fmt: skip
        """This consumer's share."""
        if not check(group, current_cid, mq_all, cid_all):
            return []
        h = self.hash_function
        ring: dict[int, str] = {}
        replicas: dict[str, int] = {}
        for cid in cid_all:  # a cid listed twice gets more replicas, as addNode counts them
            existing = replicas.get(cid, 0)
            for i in range(self.virtual_node_count):
                ring[h(f"{cid}-{i + existing}")] = cid  # a colliding hash replaces, as TreeMap.put
            replicas[cid] = existing + self.virtual_node_count
        if not ring:
            return []
        keys = sorted(ring)
        out: list[Q] = []
        for mq in mq_all:
            i = bisect_left(keys, h(queue_to_string(mq)))
            owner = ring[keys[i] if i < len(keys) else keys[0]]
            if owner == current_cid:
                out.append(mq)
        return out


class AllocateMessageQueueByConfig:
    """Always the configured queues, whoever asks (Java does not even check the group)."""

    name = "CONFIG"

    def __init__(self, queues: Iterable[QueueLike]) -> None:
        self.queues = list(queues)

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:  # fmt: skip
        """The configured list."""
        return list(self.queues)  # type: ignore[arg-type]


class AllocateMessageQueueByMachineRoom:
    """Queues of brokers named "<idc>@<name>", idc in consumer_idcs: blocks plus a remainder."""

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Iterable[str]) -> None:
        self.consumer_idcs = set(consumer_idcs)

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:  # fmt: skip
        """This consumer's share."""
        if not check(group, current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        pre = []
        for mq in mq_all:
            parts = java_split(mq.broker_name, "@")
            if len(parts) == 2 and parts[0] in self.consumer_idcs:
                pre.append(mq)
        m = len(cid_all)
        mod, rem = len(pre) // m, len(pre) % m
        out = pre[mod * index : mod * index + mod]
        if rem > index:
            out.append(pre[index + mod * m])
        return out


class MachineRoomResolver(Protocol):
    """Where a broker's queue and a consumer are deployed (AllocateMachineRoomNearby's resolver)."""

    def broker_deploy_in(self, mq: QueueLike) -> str: ...

    def consumer_deploy_in(self, cid: str) -> str: ...


class AllocateMachineRoomNearby:
    """Same-room queues go to same-room consumers; rooms with no consumer are shared by all."""

    def __init__(self, strategy: AllocateMessageQueueStrategy,
                 resolver: MachineRoomResolver) -> None:  # fmt: skip
        self.strategy = strategy
        self.resolver = resolver

    @property
    def name(self) -> str:
        """MACHINE_ROOM_NEARBY-<inner strategy's name>."""
        return f"MACHINE_ROOM_NEARBY-{self.strategy.name}"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[Q],
                 cid_all: Sequence[str]) -> list[Q]:  # fmt: skip
        """This consumer's share."""
        if not check(group, current_cid, mq_all, cid_all):
            return []
        mr2mq: dict[str, list[Q]] = {}
        for mq in mq_all:
            room = self.resolver.broker_deploy_in(mq)
            if not room:
                raise ValueError(f"Machine room is null for mq {queue_to_string(mq)}")
            mr2mq.setdefault(room, []).append(mq)
        mr2c: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.resolver.consumer_deploy_in(cid)
            if not room:
                raise ValueError(f"Machine room is null for consumer id {cid}")
            mr2c.setdefault(room, []).append(cid)
        out: list[Q] = []
        here = self.resolver.consumer_deploy_in(current_cid)
        mine = mr2mq.pop(here, None)
        if mine:
            out += self.strategy.allocate(group, current_cid, mine, mr2c.get(here, []))
        for room in sorted(mr2mq, key=java_str_key):  # Java iterates a TreeMap
            if room not in mr2c:
                out += self.strategy.allocate(group, current_cid, mr2mq[room], cid_all)
        return out


STRATEGIES: dict[str, Callable[[], AllocateMessageQueueStrategy]] = {
    "AVG": AllocateMessageQueueAveragely,
    "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle,
    "CONSISTENT_HASH": AllocateMessageQueueConsistentHash,
}
