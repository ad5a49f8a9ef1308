"""MQClientInstanceActor: one per client id; routes, heartbeats, offset ticks, relays.

Mirrors client/impl/factory/MQClientInstance.java's scheduled tasks and its remoting client,
RocketMQ 4.9.x: routes from the name servers 10 ms after start then every
pollNameServerInterval (30 s) and on demand; heartbeats to every broker 1 s after start then
every heartbeatBrokerInterval (30 s), at once for a new broker or registration, with
cleanOfflineBroker before each round; persistConsumerOffset ticks 10 s after start then every
persistConsumerOffsetInterval (5 s); UNREGISTER_CLIENT to every broker when a group leaves.
The state lives in the pure MQClientInstance (mq_client_instance.py); this adapter owns the
sockets (ThespianWatch), the timers and the channel to the user's process
(client_channel.py). Requests brokers send arrive here and are relayed
(client_remoting_processor.py).

If the channel to the user's process closes without its BYE record, the user's process is
gone: the actor kills its own process group (the admin and every actor of this client actor
system share it), so nothing outlives the application.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import shutil
import signal
import time
from typing import Any, Final

from actors.client import client_channel as ch
from actors.client.client_config import ClientConfig
from actors.client.client_remoting_processor import (
    Target,
    no_consumer,
    not_supported,
    route,
)
from actors.client.messages import (
    ClientInstanceStarted,
    ClientInstanceStartFailed,
    ConsumerRegistered,
    ConsumerUnregistered,
    PersistConsumerOffset,
    RefreshTopicRoute,
    RegisterConsumer,
    RelayedBrokerAnswer,
    RelayedBrokerRequest,
    StartClientInstance,
    TopicRouteUpdated,
    UnregisterConsumer,
    UpdateConsumerData,
)
from actors.client.mq_client_instance import MQClientInstance, default_route_for
from actors.client.service_thread_actor import ServiceThreadActor
from protocol.bodies import ConsumerData, HeartbeatData, TopicRouteData
from protocol.codes import AUTO_CREATE_TOPIC_KEY_TOPIC, RETRY_GROUP_TOPIC_PREFIX, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)

ROUTES_FIRST_MS: Final = 10.0
HEARTBEAT_FIRST_MS: Final = 1000.0
PERSIST_FIRST_MS: Final = 10_000.0
SCAN_MS: Final = 200.0
RELAY_TTL_S: Final = 60.0


class MQClientInstanceActor(ServiceThreadActor):
    """The client instance of one client id."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.core: MQClientInstance | None = None
        self.config: ClientConfig | None = None
        self.bye = False
        self.user_pgid = 0
        self.runtime_dir = ""  # the user's process's runtime directory (its channel's)
        self._relay_ids = itertools.count(1)
        self._relays: dict[int, tuple[str, float]] = {}  # request id -> (broker addr, expiry)
        self._route_waiters: set[str] = set()  # topics the user's process is waiting for
        self._fetching: set[str] = set()

    # -- start --------------------------------------------------------------------------------
    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartClientInstance):
            self._start(msg, sender)
            return
        core = self.core
        if core is None:
            return
        if isinstance(msg, RegisterConsumer):
            data = ConsumerData.from_json(msg.consumer_data)
            ok = core.register_consumer(data, msg.owner)
            self.send(msg.owner, ConsumerRegistered(msg.group, ok, "" if ok else
                      f"the consumer group {msg.group} is registered in this client already"))
            if ok:
                self._consumer_changed(data)
        elif isinstance(msg, UpdateConsumerData):
            data = ConsumerData.from_json(msg.consumer_data)
            if core.update_consumer(data):
                self._consumer_changed(data)
        elif isinstance(msg, UnregisterConsumer):
            core.unregister_consumer(msg.group)
            self._unregister(None, msg.group, lambda: self.send(sender,
                                                                ConsumerUnregistered(msg.group)))
        elif isinstance(msg, RefreshTopicRoute):
            self._fetch_route(msg.topic)
        elif isinstance(msg, RelayedBrokerAnswer):
            self._answer(msg.request_id, msg.frame)
        self._after_pass()

    def _start(self, msg: StartClientInstance, sender: Any) -> None:
        try:
            self.user_pgid = msg.user_pgid
            self.runtime_dir = os.path.dirname(msg.channel_path)
            self.config = msg.config
            client_id = msg.config.client_id()
            self.core = MQClientInstance(client_id)
            self._connect(msg.config, msg.channel_path, f"instance:{client_id}",
                          self._on_broker_request)
        except Exception as exc:
            log.exception("client instance failed to start")
            self.send(sender, ClientInstanceStartFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.schedule("routes", ROUTES_FIRST_MS)
        self.schedule("heartbeat", HEARTBEAT_FIRST_MS)
        self.schedule("persist", PERSIST_FIRST_MS)
        self.schedule("scan", SCAN_MS)
        self._rewatch()
        log.info("client instance %s started", client_id)
        self.send(sender, ClientInstanceStarted(client_id, os.getpid(), os.getpgid(0)))

    @property
    def _api_timeout_ms(self) -> int:
        """mqClientApiTimeout of this instance (started: it has its config)."""
        assert self.config is not None
        return self.config.mq_client_api_timeout_ms

    # -- readiness and timers -----------------------------------------------------------------
    def on_timer(self, key: str) -> None:
        core, cfg = self.core, self.config
        if core is None or cfg is None:
            return
        if key == "routes":
            for topic in sorted(core.topics_in_use()):
                self._fetch_route(topic)
            self.schedule("routes", cfg.poll_name_server_interval_ms)
        elif key == "heartbeat":
            dropped = core.table.clean_offline_brokers()
            for addr in dropped:
                log.info("broker %s is offline (no route names it): dropped", addr)
                if self.remoting is not None:
                    self.remoting.close_channel(addr, "offline broker")
            self._heartbeat_all()
            self.schedule("heartbeat", cfg.heartbeat_broker_interval_ms)
        elif key == "heartbeat_now":
            self._heartbeat_all()
        elif key == "persist":
            for group, entry in list(core.consumers.items()):
                if entry.owner is not None:
                    self.send(entry.owner, PersistConsumerOffset(group))
                elif self.channel is not None:
                    self.channel.send_record(ch.PersistConsumerOffset(group))
            self.schedule("persist", cfg.persist_consumer_offset_interval_ms)
        elif key == "scan":
            if self.remoting is not None:
                self.remoting.scan_response_table(time.monotonic())
            now = time.monotonic()
            for rid, (_addr, expiry) in list(self._relays.items()):
                if expiry < now:
                    del self._relays[rid]
            self.schedule("scan", SCAN_MS)
        self._after_pass()

    # -- the channel --------------------------------------------------------------------------
    def _read_channel(self, channel: ch.ChannelEnd) -> None:
        records = channel.read_records()
        for kind, payload in records or ():
            try:
                self._on_record(kind, payload)
            except Exception:
                log.exception("channel record kind=%d failed", kind)
        if records is None or channel.closed:
            channel.close()
            self.channel = None
            self._rewatch()
            if not self.bye:
                self._orphaned()

    def _orphaned(self) -> None:
        """The user's process is gone without closing: take this actor system down."""
        pgid = os.getpgid(0)
        if pgid == self.user_pgid:  # not a group of our own (never seen with Thespian's fork)
            log.error("the user's process is gone but this actor shares its process group %d: "
                      "exiting alone", pgid)
            os._exit(1)
        log.warning("the user's process closed the channel without BYE: stopping the client "
                    "actor system (process group %d)", pgid)
        if os.path.basename(self.runtime_dir).startswith(ch.RUNTIME_DIR_PREFIX):
            shutil.rmtree(self.runtime_dir, ignore_errors=True)  # nobody is left to remove it
        os.killpg(pgid, signal.SIGKILL)

    def _on_record(self, kind: int, payload: memoryview) -> None:
        core = self.core
        assert core is not None
        try:
            rec = ch.read_record(kind, payload)
        except ch.ChannelError as exc:
            log.warning("instance channel: %s", exc)
            return
        match rec:
            case ch.Bye():
                self.bye = True
            case ch.RegisterProducer(group=group):
                core.register_producer(group)
                self.schedule("heartbeat_now", 1.0)
            case ch.UnregisterProducer(group=group, op_id=op_id):
                core.unregister_producer(group)
                self._unregister(group, None, self._ack_cb(op_id))
            case ch.RegisterConsumer(data=raw, op_id=op_id):
                data = ConsumerData.from_json(raw)
                ok = core.register_consumer(data, None)
                self._ack(op_id, ok, "" if ok else "consumer group registered already")
                if ok:
                    self._consumer_changed(data)
            case ch.UpdateConsumer(data=raw):
                data = ConsumerData.from_json(raw)
                if core.update_consumer(data):
                    self._consumer_changed(data)
            case ch.UnregisterConsumer(group=group, op_id=op_id):
                core.unregister_consumer(group)
                self._unregister(None, group, self._ack_cb(op_id))
            case ch.HeartbeatBroker(addr=addr):  # a pull refused: it lost our registration
                if addr in core.heartbeat_targets():
                    self._heartbeat(addr)
            case ch.FetchRoute(topic=topic, producer=producer):
                if producer:
                    core.producer_topics.add(topic)
                self._route_waiters.add(topic)
                self._fetch_route(topic)
            case ch.BrokerAnswer(request_id=rid, frame=frame):
                self._answer(rid, frame)
            case _:
                log.warning("channel record %s not for the instance", type(rec).__name__)

    def _ack(self, op_id: Any, ok: bool = True, detail: str = "") -> None:
        if op_id is not None and self.channel is not None:
            self.channel.send_record(ch.Ack(op_id, ok, detail))

    def _ack_cb(self, op_id: Any) -> Any:
        return lambda: self._ack(op_id)

    # -- routes -------------------------------------------------------------------------------
    def _fetch_route(self, topic: str) -> None:
        if topic in self._fetching or self.api is None:
            return
        self._fetching.add(topic)
        timeout = self._api_timeout_ms
        self.api.get_topic_route_from_namesrv(
            topic, timeout, callback=lambda r, e: self._on_route(topic, r, e, default=False))

    def _on_route(self, topic: str, route_data: TopicRouteData | None, err: Any, *,
                  default: bool) -> None:  # fmt: skip
        core, api = self.core, self.api
        if core is None or api is None:
            return
        if err is not None:
            self._fetching.discard(topic)
            log.warning("route of %s not fetched: %s", topic, err)
            self._route_to_user(topic, None, str(err))
            return
        if route_data is None and not default and topic in core.producer_topics \
                and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # a new topic: the broker creates it at the first send (autoCreateTopicEnable)
            api.get_topic_route_from_namesrv(
                AUTO_CREATE_TOPIC_KEY_TOPIC, self._api_timeout_ms,
                callback=lambda r, e: self._on_route(
                    topic, default_route_for(r) if r is not None else None, e, default=True))
            return
        self._fetching.discard(topic)
        if default and route_data is not None and topic in core.table.routes:
            route_data = core.table.routes[topic]  # a real route arrived meanwhile: keep it
        changed, new_addrs = core.on_route(topic, route_data)
        if new_addrs:
            self.schedule("heartbeat_now", 1.0)
        if changed or topic in self._route_waiters:
            self._route_to_user(topic, route_data, None)
        if changed:
            data = route_data.to_json() if route_data is not None else None
            for entry in core.consumers_of(topic):
                if entry.owner is not None:
                    self.send(entry.owner, TopicRouteUpdated(topic, data))
        self._after_pass()

    def _route_to_user(self, topic: str, route_data: TopicRouteData | None,
                       error: str | None) -> None:  # fmt: skip
        core = self.core
        assert core is not None
        wanted = topic in self._route_waiters or topic in core.topics_in_use()
        self._route_waiters.discard(topic)
        if wanted and self.channel is not None:
            data = route_data.to_json() if route_data is not None else None
            self.channel.send_record(ch.Route(topic, data, error))

    def _consumer_changed(self, data: ConsumerData) -> None:
        for sub in data.subscription_data_set:
            self._fetch_route(sub.topic)
            if self.core is not None and sub.topic in self.core.table.routes:
                entry = self.core.consumers.get(data.group_name)
                route_data = self.core.table.routes[sub.topic]
                if entry is not None and entry.owner is not None:
                    self.send(entry.owner, TopicRouteUpdated(sub.topic, route_data.to_json()))
                self._route_to_user(sub.topic, route_data, None)  # known already: now theirs
        self.schedule("heartbeat_now", 1.0)

    # -- heartbeats and unregistering -----------------------------------------------------------
    def _heartbeat_all(self) -> None:
        core, api = self.core, self.api
        if core is None or api is None:
            return
        hb = core.heartbeat_data()
        for addr in core.heartbeat_targets():
            self._heartbeat(addr, hb)

    def _heartbeat(self, addr: str, hb: HeartbeatData | None = None) -> None:
        core, api = self.core, self.api
        if core is None or api is None:
            return
        api.send_heartbeat(addr, hb if hb is not None else core.heartbeat_data(),
                           self._api_timeout_ms,
                           callback=functools.partial(self._on_heartbeat, addr))  # fmt: skip

    def _on_heartbeat(self, addr: str, version: Any, err: Any) -> None:
        if err is not None:
            log.info("heartbeat to %s failed: %s", addr, err)
            return
        core = self.core
        if core is None:
            return
        for name, addrs in core.table.broker_addr_table.items():
            if addr in addrs.values():
                core.table.broker_version_table.setdefault(name, {})[addr] = int(version)

    def _unregister(self, producer_group: str | None, consumer_group: str | None,
                    done: Any) -> None:  # fmt: skip
        core, api = self.core, self.api
        assert core is not None and api is not None
        addrs = sorted(core.table.broker_addrs())
        if not addrs:
            done()
            return
        left = [len(addrs)]

        def one(addr: str, _v: Any, err: Any) -> None:
            if err is not None:
                log.info("unregister from %s failed: %s", addr, err)
            left[0] -= 1
            if left[0] == 0:
                done()
                self._after_pass()

        for addr in addrs:
            api.unregister_client(addr, core.client_id, producer_group, consumer_group,
                                  self._api_timeout_ms,
                                  callback=functools.partial(one, addr))

    # -- requests from brokers ----------------------------------------------------------------
    def _on_broker_request(self, addr: str, cmd: RemotingCommand) -> RemotingCommand | None:
        core = self.core
        if core is None:
            return None
        r = route(cmd)
        if r.target is Target.NOBODY:
            return not_supported(cmd) if r.needs_answer else None
        owner = None
        if r.target is Target.CONSUMER:
            entry = core.consumers.get(r.group or "")
            if entry is None:
                return no_consumer(cmd, r.group) if r.needs_answer else None
            owner = entry.owner
        rid = next(self._relay_ids)
        frame = cmd.encode()
        if r.needs_answer:
            self._relays[rid] = (addr, time.monotonic() + RELAY_TTL_S)
        if owner is not None:
            self.send(owner, RelayedBrokerRequest(rid, addr, frame))
        elif self.channel is not None:
            self.channel.send_record(ch.BrokerRequest(rid, addr, frame))
        if cmd.code == 326:  # PUSH_REPLY_MESSAGE_TO_CLIENT: answered here once relayed
            return cmd.make_response(ResponseCode.SUCCESS)
        return None

    def _answer(self, rid: int, frame: bytes | None) -> None:
        entry = self._relays.pop(rid, None)
        if entry is None or frame is None or self.remoting is None:
            return
        try:
            resp = RemotingCommand.decode(memoryview(frame)[4:])
        except ProtocolError as exc:
            log.warning("relayed answer %d undecodable: %s", rid, exc)
            return
        self.remoting.send_response(entry[0], resp)
