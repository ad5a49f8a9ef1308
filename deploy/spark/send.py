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
stored. The producer's pure pieces are the client's (actors.client): the route as
TopicPublishInfo (TBW102's capped by default_route_for), the queue choice, Java's
SelectMessageQueueByHash (hash_index), the retry policy (SendRetry: the same attempts, call
timeout and retry codes as Producer.send), the request (send_message_frame: the V2 header every
producer of ours writes) and the answer's parse (process_send_response); this
module keeps the window, the batching and the order per sharding key. It is not a general
producer.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from actors.client.errors import MQClientError, RemotingConnectError, RemotingTimeoutError
from actors.client.message_queue_selector import hash_index
from actors.client.mq_client_api import (
    SendRequest,
    process_send_response,
    send_message_command,
    send_message_frame,
)
from actors.client.mq_client_instance import default_route_for
from actors.client.records import MessageQueue
from actors.client.send_retry import SendRetry
from actors.client.topic_publish_info import TopicPublishInfo
from actors.runtime.tls import TlsConfig
from deploy.wire import BlockingClient
from protocol.acl import SessionCredentials
from protocol.bodies import TopicRouteData
from protocol.codes import AUTO_CREATE_TOPIC_KEY_TOPIC, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.headers import GetRouteInfoRequestHeader
from protocol.message import COMPRESS_BODY_OVER, COMPRESSED_ZLIB_SYSFLAG, compress_body
from protocol.message_batch import BatchItem, encode_batch
from protocol.message_properties import properties_to_string

log = logging.getLogger(__name__)

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
    queue: MessageQueue | None = None  # fixed (sharding key) or chosen per attempt
    ordered: bool = False
    retry: SendRetry | None = None  # its attempts, from its first send


@dataclass(slots=True)
class SendStats:
    """What one task produced."""

    messages: int = 0
    requests: int = 0
    retries: int = 0


@dataclass(slots=True)
class _Route:
    """A topic's TopicPublishInfo and its brokers' master addresses."""

    info: TopicPublishInfo
    masters: dict[str, str]


class TaskSender:
    """Sends a task's messages and waits for every acknowledgement."""

    def __init__(self, name_servers: tuple[str, ...], group: str, *, timeout_ms: int = 3000,
                 retries: int = 2, batch_size: int = 64, max_inflight: int = 16,
                 credentials: SessionCredentials | None = None,
                 tls: TlsConfig | None = None) -> None:  # fmt: skip
        self.name_servers = name_servers
        self.tls = tls  # useTLS: every connection
        self.credentials = credentials  # ACL: every request signed
        self.group = group
        self.timeout_ms = timeout_ms
        self.timeout_s = timeout_ms / 1000.0
        self.retries = retries
        self.batch_size = max(1, batch_size)
        self.max_inflight = max(1, max_inflight)
        self.routes: dict[str, _Route] = {}
        self.clients: dict[str, BlockingClient] = {}
        # (opaque, broker address, queue, unit) of each request in flight, oldest first
        self.inflight: deque[tuple[int, str, MessageQueue, _Unit]] = deque()
        # ordered queues with their one request in flight, and the ordered units held back
        # behind it, in row order; held units count as in flight
        self.busy: set[MessageQueue] = set()
        self.held: dict[MessageQueue, deque[_Unit]] = {}
        self.held_count = 0
        self.stats = SendStats()

    def close(self) -> None:
        """Close every connection."""
        for c in self.clients.values():
            c.close()
        self.clients.clear()

    def send_all(self, messages: Iterable[OutMessage]) -> SendStats:
        """Send everything; return once all are stored, or raise SendError."""
        pending: dict[tuple[str, MessageQueue | None], list[OutMessage]] = {}
        sizes: dict[tuple[str, MessageQueue | None], int] = {}
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
    def _route(self, topic: str) -> _Route:
        route = self.routes.get(topic)
        if route is None:
            data = self._fetch_route(topic)
            if data is None:
                default = self._fetch_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
                if default is None:
                    raise SendError(f"topic {topic!r} has no route and the name server has no "
                                    f"{AUTO_CREATE_TOPIC_KEY_TOPIC} route to create it from")
                data = default_route_for(default)
            info = TopicPublishInfo.from_route(topic, data)
            if not info.ok():
                raise SendError(f"topic {topic!r} has no writable queue on any master")
            masters = {bd.broker_name: addr for bd in data.broker_datas
                       if (addr := bd.master_addr) is not None}  # fmt: skip
            route = self.routes[topic] = _Route(info, masters)
        return route

    def _fetch_route(self, topic: str) -> TopicRouteData | None:
        failures = []
        for ns in self.name_servers:
            cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                          GetRouteInfoRequestHeader(topic).to_ext())
            if self.credentials is not None:
                self.credentials.sign(cmd)
            try:
                with BlockingClient(ns, tls=self.tls) as cl:
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
    def _shard(route: _Route, key: str) -> MessageQueue:
        """SelectMessageQueueByHash: abs(hashCode % n) with Java's remainder."""
        mqs = route.info.message_queue_list
        return mqs[hash_index(key, len(mqs))]

    # -- requests ----------------------------------------------------------------------------
    def _submit(self, unit: _Unit) -> None:
        """Send unit once fewer than max_inflight are in flight (or held); an ordered unit
        whose queue has a request in flight is held until that one is acknowledged."""
        while len(self.inflight) + self.held_count >= self.max_inflight:
            self._await_oldest()
        if unit.ordered:
            assert unit.queue is not None
            key = unit.queue
            if key in self.busy:
                self.held.setdefault(key, deque()).append(unit)
                self.held_count += 1
                return
            self.busy.add(key)
        self._send(unit)

    def _next_ordered(self, unit: _Unit) -> None:
        """An ordered unit was stored: send the next one held for its queue, if any."""
        assert unit.queue is not None
        key = unit.queue
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
        """The unit's next attempt (its retry policy begins with its first)."""
        retry = unit.retry
        if retry is None:
            attempts = 1 if unit.queue is not None else 1 + self.retries  # sendSelectImpl: one
            retry = unit.retry = SendRetry(unit.topic, attempts, self.timeout_ms,
                                           time.monotonic())  # fmt: skip
        route = self._route(unit.topic)
        mq = unit.queue
        if mq is None:
            mq = route.info.select_one_message_queue(retry.last_broker)
        if retry.start(mq.broker_name, time.monotonic()) is None:
            self._give_up(unit)
            return
        addr = route.masters.get(mq.broker_name)
        if self.credentials is None:
            opaque, frame = send_message_frame(self.group, self._request(unit), mq)
        else:
            cmd = self.credentials.sign(send_message_command(self.group, self._request(unit), mq))
            opaque, frame = cmd.opaque, cmd.encode()
        try:
            if addr is None:
                raise OSError(f"broker {mq.broker_name} has no master")
            client = self.clients.get(addr)
            if client is None:
                client = self.clients[addr] = BlockingClient(addr, tls=self.tls)
            client.send_raw(frame)
        except (OSError, ProtocolError) as exc:
            self._failed(unit, RemotingConnectError(addr or mq.broker_name, str(exc)))
            return
        self.inflight.append((opaque, addr, mq, unit))
        self.stats.requests += 1

    def _request(self, unit: _Unit) -> SendRequest:
        """The unit as the client's SendRequest: a batch (its items' properties inside, the
        header's WAIT as Java's MessageBatch carries it), or one message (zlib'd over 4 KiB)."""
        msgs = unit.messages
        if len(msgs) > 1:
            body = encode_batch(BatchItem(0, m.body, m.properties) for m in msgs)
            return SendRequest(unit.topic, body, "WAIT\x01true\x02", 0, "", batch=True,
                               code=RequestCode.SEND_BATCH_MESSAGE)  # fmt: skip
        body, sys_flag = msgs[0].body, 0
        if len(body) > COMPRESS_BODY_OVER:
            body, sys_flag = compress_body(body), COMPRESSED_ZLIB_SYSFLAG
        return SendRequest(unit.topic, body, properties_to_string(msgs[0].properties),
                           sys_flag, "")  # fmt: skip

    def _await_oldest(self) -> None:
        opaque, addr, mq, unit = self.inflight.popleft()
        try:
            resp = self.clients[addr].wait_response(opaque, self.timeout_s)
        except TimeoutError:
            self.clients.pop(addr, None)
            self._failed(unit, RemotingTimeoutError(addr, self.timeout_ms))
            return
        except (OSError, ProtocolError) as exc:
            self.clients.pop(addr, None)
            self._failed(unit, RemotingConnectError(addr, str(exc)))
            return
        try:
            process_send_response(mq.broker_name, unit.topic, "", resp, addr, mq)
        except MQClientError as exc:
            self._failed(unit, exc)
            return
        # a stored answer that is not SEND_OK (flush or slave timeout) is stored all the same:
        # Producer.send returns it too unless retryAnotherBrokerWhenNotStoreOK is set
        self.stats.messages += len(unit.messages)
        if unit.ordered:
            self._next_ordered(unit)

    def _failed(self, unit: _Unit, error: MQClientError) -> None:
        """Resend on another queue (another broker first) as SendRetry allows, or give up."""
        retry = unit.retry
        assert retry is not None  # set by its first send
        if retry.failed(error) and retry.more():
            log.warning("send to %s failed (%s); resending elsewhere", unit.topic, error.message)
            self.stats.retries += 1
            self._submit(unit)
            return
        self._give_up(unit)

    def _give_up(self, unit: _Unit) -> None:
        retry = unit.retry
        assert retry is not None
        outcome = retry.outcome(time.monotonic())
        detail = outcome.message if isinstance(outcome, MQClientError) else outcome.status
        raise SendError(f"send to {unit.topic} failed after {len(retry.sent_to)} attempt(s): "
                        f"{detail}")
