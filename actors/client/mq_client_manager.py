"""The user's process's view of its MQClientInstances: one handle per client id.

Mirrors client/impl/MQClientManager.java (client id -> instance, created on first use) and
the parts of MQClientInstance.java a producer or consumer calls from its own threads
(tryToFindTopicPublishInfo's route lookup, findBrokerAddressInPublish, registerProducer /
registerConsumer, the ClientRemotingProcessor hand-offs), RocketMQ 4.9.x. The instance itself
is an actor (mq_client_instance_actor.py); a handle talks to it over the channel and keeps the
routes it pushes, so a send looks its route up in this process without any hop.

Instance names (docs/CLIENT.md §2): an explicit instance_name is Java's (same name, same
instance; the same group twice in one instance is an error). Without one the process's pid is
used, shared by every client with the same name servers whose group is free in it; otherwise
pid#2, pid#3, ...
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from actors.client import client_channel as ch
from actors.client.client_config import ClientConfig, default_instance_name
from actors.client.client_runtime import ClientRuntime
from actors.client.errors import ClientClosedError, ClientErrorCode, MQClientError
from actors.client.messages import ClientInstanceStarted, ClientInstanceStartFailed
from actors.client.mq_client_api import MQClientAPI
from actors.client.mq_client_instance import (
    FindBrokerResult,
    RefusalHeartbeats,
    TopicRouteTable,
)
from actors.client.topic_publish_info import TopicPublishInfo
from actors.runtime.typed_record import TypedRecord
from protocol.bodies import ConsumerData, TopicRouteData
from protocol.codes import CLIENT_INNER_PRODUCER_GROUP, RequestCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)

ROUTE_TIMEOUT_S: Final = 3.0
CHANNEL_TIMEOUT_S: Final = 10.0
ACK_TIMEOUT_S: Final = 10.0

PRODUCER: Final = "producer"
CONSUMER: Final = "consumer"


class ProducerInner(Protocol):
    """What an instance calls on a producer (MQProducerInner)."""

    def check_transaction_state(self, addr: str, cmd: RemotingCommand) -> None:
        """A broker's CHECK_TRANSACTION_STATE for this producer's group (I/O thread)."""


class ConsumerSink(Protocol):
    """What an instance calls on a consumer served in the user's process (I/O thread)."""

    def on_route(self, topic: str, route: TopicRouteData | None) -> None:
        """A subscribed topic's route changed (None: the topic is gone)."""

    def on_persist(self) -> None:
        """persistConsumerOffset tick (every 5 s)."""

    def on_broker_request(self, addr: str, cmd: RemotingCommand) -> RemotingCommand | None:
        """A broker request for the group; the answer, or None (oneway / no answer)."""


class InstanceHandle:
    """One MQClientInstance as the user's process sees it (ChannelHandler of its channel)."""

    def __init__(self, runtime: ClientRuntime, config: ClientConfig) -> None:
        self.runtime = runtime
        self.config = config
        self.client_id = config.client_id()
        self.key = f"instance:{self.client_id}"
        self.table = TopicRouteTable()
        self.publish_infos: dict[str, TopicPublishInfo] = {}
        self.claims: set[tuple[str, str]] = set()
        self.producers: dict[str, ProducerInner] = {}
        self.sinks: dict[str, ConsumerSink] = {}
        self.reply_handler: Callable[[str, RemotingCommand], None] | None = None
        self.refs = 0
        self.closed = False
        self.end: ch.ChannelEnd | None = None
        self._opened = threading.Event()
        self._cond = threading.Condition()
        self._route_errors: dict[str, str] = {}
        self._route_gen: dict[str, int] = {}
        self._acks: dict[int, threading.Event] = {}
        self._ack_ids = itertools.count(1)
        self.actor: Any = None
        self._api: MQClientAPI | None = None
        self._inner: Any = None
        self._refusals = RefusalHeartbeats()

    def start(self) -> None:
        """Create the instance actor and wait for its channel."""
        from actors.client.messages import StartClientInstance
        from actors.client.mq_client_instance_actor import MQClientInstanceActor

        self.runtime.add_channel_handler(self.key, self)
        try:
            self.actor, reply = self.runtime.create_actor(
                MQClientInstanceActor,
                StartClientInstance(self.config, self.runtime.channel_path, os.getpgid(0)),
                (ClientInstanceStarted, ClientInstanceStartFailed))
            if isinstance(reply, ClientInstanceStartFailed):
                raise MQClientError(ClientErrorCode.CLIENT_CLOSED,
                                    f"client instance failed to start: {reply.reason}")
            if not self._opened.wait(CHANNEL_TIMEOUT_S):
                raise MQClientError(ClientErrorCode.CLIENT_CLOSED,
                                    "client instance did not connect its channel")
        except BaseException:
            self.runtime.remove_channel_handler(self.key)
            if self.actor is not None:
                self.runtime.stop_actor(self.actor)
            raise

    # -- the channel (I/O thread) ---------------------------------------------------------------
    def on_open(self, end: ch.ChannelEnd) -> None:
        self.end = end
        self._opened.set()

    def on_closed(self, end: ch.ChannelEnd) -> None:
        with self._cond:
            self.end = None
            self._cond.notify_all()
        for ev in list(self._acks.values()):
            ev.set()
        if not self.closed:
            log.error("client instance %s closed its channel", self.client_id)

    def on_records(self, end: ch.ChannelEnd, records: list[ch.Record]) -> None:
        for kind, payload in records:
            try:
                rec = ch.read_record(kind, payload)
                match rec:
                    case ch.Route(topic=topic, route_json=data, error=error):
                        self._on_route(topic, data, error)
                    case ch.BrokerRequest(request_id=rid, broker_addr=addr, frame=frame):
                        self._on_broker_request(rid, addr, frame)
                    case ch.Ack(op_id=op_id):
                        ev = self._acks.pop(op_id, None)
                        if ev is not None:
                            ev.set()
                    case ch.PersistConsumerOffset(group=group):
                        sink = self.sinks.get(group)
                        if sink is not None:
                            sink.on_persist()
                    case _:
                        log.warning("instance channel: unexpected %s", type(rec).__name__)
            except Exception:
                log.exception("instance channel record kind=%d failed", kind)

    def _on_route(self, topic: str, data: bytes | None, error: str | None) -> None:
        route = TopicRouteData.from_json(data) if data is not None else None
        with self._cond:
            if error is not None:
                self._route_errors[topic] = error
            else:
                self._route_errors.pop(topic, None)
                self.table.update(topic, route)
                if route is None:
                    self.publish_infos.pop(topic, None)
                else:
                    self.publish_infos[topic] = TopicPublishInfo.from_route(topic, route)
            self._route_gen[topic] = self._route_gen.get(topic, 0) + 1
            self._cond.notify_all()
        if error is None:
            for sink in list(self.sinks.values()):
                sink.on_route(topic, route)

    def _on_broker_request(self, rid: int, addr: str, frame: bytes) -> None:
        try:
            cmd = RemotingCommand.decode(memoryview(frame)[4:])
        except ProtocolError as exc:
            log.warning("relayed request undecodable: %s", exc)
            return
        resp: RemotingCommand | None = None
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_transaction(addr, cmd)
        elif cmd.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT:
            if self.reply_handler is not None:
                self.reply_handler(addr, cmd)
        else:
            group = (cmd.ext_fields or {}).get("consumerGroup", "")
            sink = self.sinks.get(group)
            if sink is not None:
                resp = sink.on_broker_request(addr, cmd)
        if resp is not None and self.end is not None:
            self.end.send_record(ch.BrokerAnswer(rid, resp.encode()))

    def _check_transaction(self, addr: str, cmd: RemotingCommand) -> None:
        from protocol.message import PROPERTY_PRODUCER_GROUP, decode_message_ext

        try:
            group = decode_message_ext(bytes(cmd.body)).properties.get(PROPERTY_PRODUCER_GROUP)
        except ValueError as exc:  # MessageDecodeError, or properties that are no UTF-8
            log.warning("CHECK_TRANSACTION_STATE with an undecodable message: %s", exc)
            return
        producer = self.producers.get(group or "")
        if producer is None:
            log.warning("CHECK_TRANSACTION_STATE for group %s: no such producer here", group)
            return
        producer.check_transaction_state(addr, cmd)

    # -- calls from the clients' threads --------------------------------------------------------
    def control(self, rec: TypedRecord, wait: bool = False,
                timeout_s: float = ACK_TIMEOUT_S) -> bool:  # fmt: skip
        """Send a registration record to the instance; with wait (a record with an op_id),
        block until it acknowledges."""
        end = self.end
        if end is None or end.closed:
            raise ClientClosedError("client instance")
        ev = None
        if wait:
            op_id = next(self._ack_ids)
            rec = dataclasses.replace(rec, op_id=op_id)  # type: ignore[type-var]
            ev = self._acks[op_id] = threading.Event()
        end.send_record(rec)
        return ev.wait(timeout_s) if ev is not None else True

    @property
    def api(self) -> MQClientAPI:
        """Broker calls from the user's process (the process's RemotingClient; sync or
        callback form: see mq_client_api.py)."""
        api = self._api
        if api is None:
            api = self._api = MQClientAPI(self.runtime.remoting_for(self.config.tls), self.config)
        return api

    def inner_producer(self) -> Any:
        """The instance's CLIENT_INNER_PRODUCER (a DefaultMQProducerImpl): what a consumer
        uses to resend to %RETRY%group when CONSUMER_SEND_MSG_BACK fails."""
        with self._cond:
            if self._inner is None:
                from actors.client.default_mq_producer_impl import DefaultMQProducerImpl

                self._inner = DefaultMQProducerImpl(CLIENT_INNER_PRODUCER_GROUP, self, self.api)
                self.control(ch.RegisterProducer(CLIENT_INNER_PRODUCER_GROUP))
            return self._inner

    def _fetch_route(self, topic: str, timeout_s: float, producer: bool) -> str | None:
        """Ask the instance for the topic's route and wait, at most timeout_s, until it has
        answered; the error it reported, if any."""
        with self._cond:
            gen = self._route_gen.get(topic, 0)
        self.control(ch.FetchRoute(topic, producer))
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._route_gen.get(topic, 0) == gen and self.end is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._route_errors.get(topic)

    def topic_route(self, topic: str, timeout_s: float = ROUTE_TIMEOUT_S
                    ) -> TopicRouteData | None:  # fmt: skip
        """The topic's route fetched now through the instance (None: no such topic); the
        instance keeps pushing its changes, into `table`, while the topic is in use."""
        error = self._fetch_route(topic, timeout_s, False)
        if error:
            raise MQClientError(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
                                f"route of {topic} not fetched: {error}")
        return self.table.route(topic)

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this_broker: bool) -> FindBrokerResult | None:
        """See TopicRouteTable.find_broker_address_in_subscribe."""
        return self.table.find_broker_address_in_subscribe(broker_name, broker_id,
                                                           only_this_broker)

    def publish_info(self, topic: str, timeout_s: float = ROUTE_TIMEOUT_S) -> TopicPublishInfo:
        """The topic's publish info, fetched through the instance when not known yet."""
        info = self.publish_infos.get(topic)
        if info is not None and info.ok():
            return info
        error = self._fetch_route(topic, timeout_s, True)
        info = self.publish_infos.get(topic)
        if info is not None and info.ok():
            return info
        if error:
            raise MQClientError(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
                                f"No route info of this topic: {topic} ({error})")
        raise MQClientError(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
                            f"No route info of this topic: {topic}")

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master address of broker_name."""
        return self.table.find_broker_address_in_publish(broker_name)

    def register_producer(self, group: str, inner: ProducerInner) -> None:
        """Heartbeats carry the group from now on; check-backs reach `inner`."""
        self.producers[group] = inner
        self.control(ch.RegisterProducer(group))

    def unregister_producer(self, group: str) -> None:
        """UNREGISTER_CLIENT to every broker (waits, bounded)."""
        self.producers.pop(group, None)
        try:
            self.control(ch.UnregisterProducer(group), wait=True)
        except ClientClosedError:
            pass

    def register_consumer(self, data: ConsumerData, sink: ConsumerSink) -> None:
        """Serve a consumer from the user's process (see docs/CLIENT.md §4.4)."""
        self.sinks[data.group_name] = sink
        self.control(ch.RegisterConsumer(data.group_name, data.to_json()), wait=True)

    def update_consumer(self, data: ConsumerData) -> None:
        """The consumer's subscriptions changed: heartbeat at once."""
        self.control(ch.UpdateConsumer(data.group_name, data.to_json()))

    def heartbeat_broker(self, addr: str) -> None:
        """A pull to `addr` was refused for want of this client's registration: heartbeat
        that broker at once (rate-limited per broker: RefusalHeartbeats)."""
        with self._cond:
            due = self._refusals.due(addr, time.monotonic())
        if due:
            try:
                self.control(ch.HeartbeatBroker(addr))
            except ClientClosedError:
                pass

    def unregister_consumer(self, group: str) -> None:
        """UNREGISTER_CLIENT to every broker (waits, bounded)."""
        self.sinks.pop(group, None)
        try:
            self.control(ch.UnregisterConsumer(group), wait=True)
        except ClientClosedError:
            pass


class MQClientManager:
    """client id -> InstanceHandle for this process, reference counted."""

    _lock = threading.Lock()
    _handles: dict[str, InstanceHandle] = {}

    @classmethod
    def acquire(cls, config: ClientConfig, role: str, group: str,
                explicit_instance: bool) -> InstanceHandle:  # fmt: skip
        """The instance a client of (role, group) uses; its runtime is started if needed."""
        with cls._lock:
            seq = 1
            while True:
                cfg = config if explicit_instance else config.with_instance(
                    default_instance_name(seq))
                cid = cfg.client_id()
                handle = cls._handles.get(cid)
                if handle is not None and handle.closed:
                    handle = None
                if handle is None:
                    handle = cls._create(cfg)
                    break
                fits = handle.config.namesrv_addrs == cfg.namesrv_addrs and \
                    handle.config.credentials == cfg.credentials and \
                    handle.config.tls == cfg.tls and \
                    (role, group) not in handle.claims
                if fits:
                    break
                if explicit_instance:
                    if (role, group) in handle.claims:
                        raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                            f"The {role} group[{group}] has been created before, "
                                            "specify another name please.")
                    raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                        f"instance {cfg.instance_name} uses other name servers "
                                        "or other ACL credentials or TLS settings")
                seq += 1
            handle.claims.add((role, group))
            handle.refs += 1
            return handle

    @classmethod
    def _create(cls, cfg: ClientConfig) -> InstanceHandle:
        runtime = ClientRuntime.get()
        handle = InstanceHandle(runtime, cfg)
        try:
            handle.start()
        except BaseException:
            runtime.release()
            raise
        cls._handles[handle.client_id] = handle
        return handle

    @classmethod
    def release(cls, handle: InstanceHandle, role: str, group: str) -> None:
        """A client of (role, group) is done with the instance; the last one stops it."""
        with cls._lock:
            handle.claims.discard((role, group))
            handle.refs -= 1
            if handle.refs > 0:
                return
            handle.closed = True
            cls._handles.pop(handle.client_id, None)
        runtime = handle.runtime
        if handle.end is not None:
            handle.end.send_record(ch.Bye())
        runtime.remove_channel_handler(handle.key)
        if handle.actor is not None:
            runtime.stop_actor(handle.actor)
        runtime.release()
