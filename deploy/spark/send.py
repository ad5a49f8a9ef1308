"""A Spark task's sends: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE to queues chosen round robin.

Mirrors client/impl/producer/DefaultMQProducerImpl.java sendDefaultImpl (the route from the
name server, falling back to TBW102's so the broker creates the topic; one queue per send
chosen round robin by TopicPublishInfo.selectOneMessageQueue, avoiding the broker that just
failed; retryTimesWhenSendFailed more attempts) and sendSelectImpl with
SelectMessageQueueByHash for a sharding key (no resend to another queue, as an orderly send
has none), over MQClientAPIImpl.sendMessage. Messages without a delay level go in
SEND_BATCH_MESSAGE bodies (MessageBatch: same topic, no delay); bodies over 4 KiB sent alone
are zlib-compressed as Java does (compressMsgBodyOverHowmuch). Several sends are in flight
(max_inflight), but a queue of sharding-keyed rows has at most one: a broker that stores with
several threads (Java's sendMessageThreadPoolNums, 8 on a host of 4 or more cores) may store
the concurrent requests of one connection in any order, so the next batch of such a queue is
held back until the broker acknowledged the one before; other queues proceed meanwhile.
send_all returns only when every send is acknowledged, so a task commits only what the broker
stored. Kept small and in this one module so it can later use the client's pure producer
pieces; it is not a general producer.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from deploy.wire import BlockingClient
from protocol.bodies import TopicRouteData
from protocol.codes import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    SEND_RETRY_CODES,
    SEND_SUCCESS_CODES,
    PermName,
    RequestCode,
    ResponseCode,
)
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.headers import GetRouteInfoRequestHeader, SendMessageRequestHeader
from protocol.message import COMPRESS_BODY_OVER, COMPRESSED_ZLIB_SYSFLAG, compress_body
from protocol.message_batch import BatchItem, encode_batch
from protocol.record import java_string_hash, properties_to_string

log = logging.getLogger(__name__)

DEFAULT_TOPIC_QUEUE_NUMS: Final = 4  # DefaultMQProducer.defaultTopicQueueNums
MAX_BATCH_BYTES: Final = 1024 * 1024  # well under maxMessageSize (4 MiB)


class SendError(Exception):
    """A message could not be stored (after the retries allowed)."""


@dataclass(slots=True)
class OutMessage:
    """One row to produce."""

    topic: str
    body: bytes
    properties: dict[str, str]  # TAGS, KEYS, UNIQ_KEY, DELAY, user properties
    sharding_key: str | None = None


@dataclass(slots=True)
class _Unit:
    """One request's worth: a single message or a batch, for one topic."""

    topic: str
    messages: list[OutMessage]
    queue: tuple[str, int] | None = None  # fixed (sharding key) or chosen per attempt
    ordered: bool = False
    attempt: int = 0
    last_broker: str | None = None


@dataclass(slots=True)
class SendStats:
    """What one task produced."""

    messages: int = 0
    requests: int = 0
    retries: int = 0
    first_queue_offsets: dict[str, int] = field(default_factory=dict)


class _PublishInfo:
    """TopicPublishInfo: the writable master queues of a topic, and the round-robin index."""

    def __init__(self, route: TopicRouteData, from_default: bool) -> None:
        masters = {bd.broker_name: bd.master_addr for bd in route.broker_datas}
        self.masters: dict[str, str] = {b: a for b, a in masters.items() if a}
        self.queues: list[tuple[str, int]] = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if PermName.is_writeable(qd.perm) and qd.broker_name in self.masters:
                n = qd.write_queue_nums
                if from_default:
                    n = min(DEFAULT_TOPIC_QUEUE_NUMS, n)
                self.queues += [(qd.broker_name, q) for q in range(n)]
        self.index = int(time.monotonic_ns() // 1000)  # ThreadLocalIndex starts at random

    def select(self, last_broker: str | None) -> tuple[str, int]:
        """selectOneMessageQueue(lastBrokerName)."""
        n = len(self.queues)
        for _ in range(n):
            self.index += 1
            q = self.queues[self.index % n]
            if q[0] != last_broker:
                return q
        self.index += 1
        return self.queues[self.index % n]


class TaskSender:
    """Sends a task's messages and waits for every acknowledgement."""

    def __init__(self, name_servers: tuple[str, ...], group: str, *, timeout_ms: int = 3000,
                 retries: int = 2, batch_size: int = 64, max_inflight: int = 16) -> None:
        self.name_servers = name_servers
        self.group = group
        self.timeout_s = timeout_ms / 1000.0
        self.retries = retries
        self.batch_size = max(1, batch_size)
        self.max_inflight = max(1, max_inflight)
        self.routes: dict[str, _PublishInfo] = {}
        self.clients: dict[str, BlockingClient] = {}
        self.inflight: deque[tuple[int, str, _Unit]] = deque()  # (opaque, addr, unit)
        # ordered queues (topic, broker, queue id) with their one request in flight, and the
        # ordered units held back behind it, in row order; held units count as in flight
        self.busy: set[tuple[str, str, int]] = set()
        self.held: dict[tuple[str, str, int], deque[_Unit]] = {}
        self.held_count = 0
        self.stats = SendStats()

    def close(self) -> None:
        """Close every connection."""
        for c in self.clients.values():
            c.close()
        self.clients.clear()

    def send_all(self, messages: Iterable[OutMessage]) -> SendStats:
        """Send everything; return once all are stored, or raise SendError."""
        pending: dict[tuple[str, tuple[str, int] | None], list[OutMessage]] = {}
        sizes: dict[tuple[str, tuple[str, int] | None], int] = {}
        for m in messages:
            info = self._route(m.topic)
            if "DELAY" in m.properties:
                queue = self._shard(info, m.sharding_key) if m.sharding_key else None
                self._submit(_Unit(m.topic, [m], queue, m.sharding_key is not None))
                continue
            key = (m.topic, self._shard(info, m.sharding_key) if m.sharding_key else None)
            batch = pending.setdefault(key, [])
            batch.append(m)
            sizes[key] = sizes.get(key, 0) + len(m.body)
            if len(batch) >= self.batch_size or sizes[key] >= MAX_BATCH_BYTES:
                self._submit(_Unit(key[0], pending.pop(key), key[1], key[1] is not None))
                sizes.pop(key)
        for key, batch in pending.items():
            self._submit(_Unit(key[0], batch, key[1], key[1] is not None))
        while self.inflight:
            self._await_oldest()
        return self.stats

    # -- routes and queues -------------------------------------------------------------------
    def _route(self, topic: str) -> _PublishInfo:
        info = self.routes.get(topic)
        if info is None:
            route = self._fetch_route(topic)
            from_default = route is None
            if route is None:
                route = self._fetch_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
            if route is None:
                raise SendError(f"topic {topic!r} has no route and the name server has no "
                                f"{AUTO_CREATE_TOPIC_KEY_TOPIC} route to create it from")
            info = _PublishInfo(route, from_default)
            if not info.queues:
                raise SendError(f"topic {topic!r} has no writable queue on any master")
            self.routes[topic] = info
        return info

    def _fetch_route(self, topic: str) -> TopicRouteData | None:
        failures = []
        for ns in self.name_servers:
            cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                          GetRouteInfoRequestHeader(topic).to_ext())
            try:
                with BlockingClient(ns) as cl:
                    resp = cl.invoke(cmd, self.timeout_s)
            except (OSError, TimeoutError, ProtocolError) as exc:
                failures.append(f"{ns}: {exc}")
                continue
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            if resp.code != ResponseCode.SUCCESS:
                raise SendError(f"name server {ns}: code {resp.code} {resp.remark or ''}")
            return TopicRouteData.from_json(bytes(resp.body))
        raise SendError(f"no name server answered: {'; '.join(failures)}")

    @staticmethod
    def _shard(info: _PublishInfo, key: str) -> tuple[str, int]:
        """SelectMessageQueueByHash: Java's String.hashCode modulo the queue count."""
        value = java_string_hash(key) % len(info.queues)  # Python's % is never negative
        return info.queues[value]

    # -- requests ----------------------------------------------------------------------------
    def _submit(self, unit: _Unit) -> None:
        """Send unit once fewer than max_inflight are in flight (or held); an ordered unit
        whose queue has a request in flight is held until that one is acknowledged."""
        while len(self.inflight) + self.held_count >= self.max_inflight:
            self._await_oldest()
        if unit.ordered:
            assert unit.queue is not None
            key = (unit.topic, *unit.queue)
            if key in self.busy:
                self.held.setdefault(key, deque()).append(unit)
                self.held_count += 1
                return
            self.busy.add(key)
        self._send(unit)

    def _next_ordered(self, unit: _Unit) -> None:
        """An ordered unit was stored: send the next one held for its queue, if any."""
        assert unit.queue is not None
        key = (unit.topic, *unit.queue)
        waiting = self.held.get(key)
        if not waiting:
            self.busy.discard(key)
            return
        nxt = waiting.popleft()
        self.held_count -= 1
        if not waiting:
            del self.held[key]
        self._send(nxt)

    def _send(self, unit: _Unit) -> None:
        info = self._route(unit.topic)
        broker, qid = unit.queue if unit.queue is not None else info.select(unit.last_broker)
        unit.last_broker = broker
        addr = info.masters.get(broker)
        cmd = self._command(unit, broker, qid)
        try:
            if addr is None:
                raise OSError(f"broker {broker} has no master")
            client = self.clients.get(addr)
            if client is None:
                client = self.clients[addr] = BlockingClient(addr)
            client.send(cmd)
        except (OSError, ProtocolError) as exc:
            self._failed(unit, f"{broker}: {exc}")
            return
        self.inflight.append((cmd.opaque, addr, unit))
        self.stats.requests += 1

    def _command(self, unit: _Unit, broker: str, qid: int) -> RemotingCommand:
        msgs = unit.messages
        batch = len(msgs) > 1
        sys_flag = 0
        if batch:
            body = encode_batch(BatchItem(0, m.body, m.properties) for m in msgs)
            props = "WAIT\x01true\x02"
        else:
            body = msgs[0].body
            props = properties_to_string(msgs[0].properties)
            if len(body) > COMPRESS_BODY_OVER:
                body, sys_flag = compress_body(body), COMPRESSED_ZLIB_SYSFLAG
        header = SendMessageRequestHeader(
            producer_group=self.group, topic=unit.topic,
            default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS, queue_id=qid, sys_flag=sys_flag,
            born_timestamp=int(time.time() * 1000), flag=0, properties=props,
            reconsume_times=0, unit_mode=False, batch=batch, bname=broker)  # fmt: skip
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        return RemotingCommand.request(code, header.to_ext_v2(), body)

    def _await_oldest(self) -> None:
        opaque, addr, unit = self.inflight.popleft()
        try:
            resp = self.clients[addr].wait_response(opaque, self.timeout_s)
        except (OSError, TimeoutError, ProtocolError) as exc:
            self.clients.pop(addr, None)
            self._failed(unit, f"{addr}: {exc}")
            return
        if resp.code in SEND_SUCCESS_CODES:
            self.stats.messages += len(unit.messages)
            ext = resp.ext_fields or {}
            key = f"{unit.topic}/{unit.last_broker}/{ext.get('queueId')}"
            self.stats.first_queue_offsets.setdefault(key, int(ext.get("queueOffset", -1)))
            if unit.ordered:
                self._next_ordered(unit)
            return
        why = f"{addr} answered code {resp.code}: {resp.remark or ''}"
        if resp.code not in SEND_RETRY_CODES and resp.code != ResponseCode.SYSTEM_BUSY:
            raise SendError(f"send to {unit.topic} refused: {why}")
        self._failed(unit, why)

    def _failed(self, unit: _Unit, why: str) -> None:
        """Resend on another queue (another broker first), or give up."""
        if unit.ordered or unit.attempt >= self.retries:
            raise SendError(f"send to {unit.topic} failed after {unit.attempt + 1} "
                            f"attempt(s): {why}")  # fmt: skip
        log.warning("send to %s failed (%s); resending elsewhere", unit.topic, why)
        unit.attempt += 1
        self.stats.retries += 1
        self._submit(unit)
