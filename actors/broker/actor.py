"""Broker actors: ProcessorActor (one per processor group) and BrokerControllerActor.

Mirrors broker/BrokerController.java (initialize/start/shutdown, registerProcessor with one
executor per processor group, registerBrokerAll every registerNameServerPeriod, persisting
consumer offsets every flushConsumerOffsetInterval) and the executor side of
remoting/netty/NettyRemotingAbstract.java, RocketMQ 4.9.x. Requests reach a ProcessorActor
over its direct channel (actors.runtime.channel), never as Thespian messages; Thespian carries
only startup, replicated-state events, and shutdown.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import pickle
import time
from typing import Any

from thespian.actors import ActorExitRequest

from actors.broker.ha import HAServiceActor
from actors.broker.index_service import IndexServiceActor, broker_store_config
from actors.broker.notify_message_arriving_listener import (
    HOLDS_OFF_DELAY_MS,
    ArrivalNoticeGate,
    HoldsReporter,
)
from actors.broker.supervision import HA, INDEX, REMOTING, BrokerChildSupervisor
from actors.runtime.channel import (
    HOLDS,
    Channel,
    TokenGate,
    accept_channels,
    add_holds,
    add_notices,
    channel_token,
    connect_channel,
    events_record,
    listen_address,
    listen_channel,
)
from actors.runtime.messages import (
    BrokerEventBatch,
    BrokerStarted,
    BrokerStartFailed,
    BrokerStopped,
    ConnectNotices,
    EventsApplied,
    HAFailed,
    HAReady,
    IndexerFailed,
    IndexerReady,
    IndexerStopped,
    ProcessorReady,
    ProcessorStartFailed,
    ReleaseBarrier,
    RemotingReady,
    RemotingStartFailed,
    RemotingStopped,
    ShutdownStore,
    StartBroker,
    StartHA,
    StartIndexer,
    StartProcessor,
    StopBroker,
    StopIndexer,
    StopRemoting,
    StoreShutdownDone,
)
from actors.runtime.processor_host import ChannelOutbox, ProcessorHost
from actors.runtime.tcp import ClientConn
from actors.runtime.watch import WatchingActor, now_ms
from store.stats_page import OFF_LOCK_SINCE_MS, StatsPage, queue_offset, stats_path

log = logging.getLogger(__name__)

REAL_PERSONALITY = "actors.broker.actor"
MAX_TICK_MS = 1000.0
SLAVE_SYNC_MS = 10_000.0  # SlaveSynchronize period (BrokerController: every 10 s)
SLOW_TICK_MS = 50.0
FLUSH_RETRY_MS = 1.0
REPLY_FLUSH_EVERY = 16  # requests per sub-batch: replies leave while the rest is processed
NS_FIRST_RETRY_MS = 200.0  # a lost name server connection: register again this soon,
NS_RETRY_MS = 1000.0  # then this often until it answers


# -- personalities: where groups, contexts and the controller core come from ------------------
def load_personality(name: str | None) -> Any:
    """The module providing GROUPS, DEFAULT_GROUP, make_context, make_controller."""
    if not name or name == REAL_PERSONALITY:
        return _RealPersonality()
    return importlib.import_module(name)


class _RealPersonality:
    """The real broker: actors.broker.processors + actors.broker.controller (H5's cores)."""

    @property
    def GROUPS(self) -> Any:
        from actors.broker.processors import BROKER_PROCESSOR_GROUPS

        return BROKER_PROCESSOR_GROUPS

    @property
    def DEFAULT_GROUP(self) -> str:
        from actors.broker.processors import DEFAULT_GROUP

        return str(DEFAULT_GROUP)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        from actors.broker.processors import make_context

        return make_context(*args, **kwargs)

    def make_controller(self, broker_config: Any, store_config: Any, now: int,
                        runtime_dir: str = "") -> Any:  # fmt: skip
        from actors.broker.controller import BrokerControllerCore

        core = BrokerControllerCore(broker_config, store_config)
        core.load(now, runtime_dir)  # the shared consumer offset table goes there
        return _ControllerAdapter(core)


class _ControllerAdapter:
    """The controller core seen through the runtime's calls (see actors.runtime.echo)."""

    def __init__(self, core: Any) -> None:
        self.core = core

    def snapshot(self) -> Any:
        return self.core.snapshot()

    def route_events(
        self, events: list[Any], origin: str, t: int
    ) -> tuple[dict[str, list[Any]], bool]:
        forward = self.core.apply_events(events, origin, t)
        return forward, bool(self.core.take_register_needed())

    def take_version_events(self) -> dict[str, list[Any]]:
        return dict(self.core.take_version_events())

    def register_requests(self, t: int) -> list[tuple[str, Any]]:
        return list(self.core.build_register_requests(t))

    def take_barriers(self) -> list[tuple[str, int]]:
        return list(self.core.take_barriers())

    def unregister_requests(self) -> list[tuple[str, Any]]:
        return list(self.core.build_unregister_requests())

    def persist(self, t: int) -> None:
        self.core.persist_offsets()

    def shutdown(self, t: int) -> None:
        self.core.shutdown(t)

    def on_namesrv_response(self, addr: str, cmd: Any, t: int) -> None:
        self.core.on_register_response(addr, cmd)

    # HA: the master's HA port in registrations; a slave's master and SlaveSynchronize
    def set_ha_port(self, port: int) -> None:
        self.core.ha_port = port

    def take_master_change(self) -> dict[str, list[Any]]:
        return dict(self.core.take_master_change())

    def order_topic_events(self, addr: str, cmd: Any) -> list[Any]:
        return list(self.core.order_topic_events(addr, cmd))

    @property
    def master_addr(self) -> str:
        return str(self.core.master_addr)

    @property
    def slave_sync_codes(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.core.SLAVE_SYNC_CODES)

    def slave_sync_events(self, code: int, body: bytes) -> list[Any]:
        return list(self.core.slave_sync_events(code, body))

    def tick(self, t: int) -> int | None:
        return self.core.tick(t)  # type: ignore[no-any-return]


# -- processor actor -----------------------------------------------------------------------
class ProcessorActor(WatchingActor):
    """Hosts one processor core: reads its channel in batches, writes replies back."""

    LINGER_IDLE_MS = 5.0
    LINGER_CAP_MS = 50.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group = ""
        self.host: ProcessorHost | None = None
        self.ctx: Any = None
        self.core: Any = None
        self.outbox = ChannelOutbox()
        self.listener: Any = None
        self.token = b""  # TCP channels: what a connection must send first
        self.gate: TokenGate | None = None  # TCP channels waiting for their token
        self.listen_fd = -1
        self.channels: dict[int, Channel] = {}
        self.notice_ch: Channel | None = None  # send actor: to the pull actor
        self._core_fds: set[int] = set()  # descriptors the core asked to watch (watch_fds)
        self.gate_notices = ArrivalNoticeGate()  # send actor: notices to the pull actor
        self.holds = HoldsReporter()  # pull actor: HOLDS records to the send actor
        self.controller: Any = None
        self.store_closed = False

    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartProcessor):
            try:
                self._start(msg)
            except Exception as exc:
                log.exception("processor group=%s failed to start", msg.group)
                self.send(sender, ProcessorStartFailed(msg.group, f"{type(exc).__name__}: {exc}"))
                return
            self.send(sender, ProcessorReady(msg.group, listen_address(self.listener)))
        elif isinstance(msg, BrokerEventBatch):
            if self.ctx is not None:
                t = now_ms()
                for event in msg.events:  # a replica that cannot apply one ends the actor
                    self.ctx.apply(event, t)
                self._after_batch()
        elif isinstance(msg, ReleaseBarrier):
            release = getattr(self.core, "release", None)
            if callable(release):
                try:
                    release(msg.token, now_ms())
                except Exception:
                    log.exception("group=%s release(%d) failed", self.group, msg.token)
            self._after_batch()
        elif isinstance(msg, ConnectNotices):
            if self.notice_ch is not None:  # the pull actor was replaced: the old one is gone
                self.unwatch(self.notice_ch.fd)
                self.notice_ch.close()
            self.gate_notices.connected()  # until the new pull actor says otherwise
            self.notice_ch = connect_channel(
                msg.channel_addr, name="notices", token=getattr(msg, "channel_token", b"")
            )
            add_notices(self.notice_ch.out, [])  # hello: the pull actor learns this channel
            self.outbox.dirty.add(self.notice_ch)
            self._update_watch()
            self._flush()
        elif isinstance(msg, ShutdownStore):
            ok, detail = self._shutdown_store()
            self.send(sender, StoreShutdownDone(ok, detail))

    def _start(self, msg: StartProcessor) -> None:
        personality = load_personality(msg.personality)
        groups = {g.name: g for g in personality.GROUPS}
        group = groups[msg.group]
        self.group = group.name
        self.controller = msg.controller
        self.ctx = personality.make_context(
            msg.broker_config,
            msg.store_config,
            group=group.name,
            outbox=self.outbox,
            now_ms=now_ms(),
        )
        if msg.snapshot is not None:
            self.ctx.load_snapshot(msg.snapshot)
        if hasattr(self.ctx, "runtime_dir"):
            self.ctx.runtime_dir = msg.runtime_dir  # e.g. the send core's HA wake pipes
        if hasattr(self.ctx, "registration_barrier"):
            self.ctx.registration_barrier = True  # the controller releases held replies
        self.core = group.build(self.ctx)
        self.SPIN_US = group.spin_us
        bc = msg.broker_config
        max_wait = int(getattr(bc, group.max_wait_ms_key, 3000))
        slow_fn = getattr(bc, "slow_processor_ms", None)
        slow_ms = slow_fn(group.name) if callable(slow_fn) else 0
        self.host = ProcessorHost(group.name, self.core, self.outbox, max_wait, slow_ms / 1000.0,
                                  group.shed_codes)  # fmt: skip
        if hasattr(self.core, "on_arrival"):
            self.host.on_notices = self._on_notices
        self.host.on_apply = self._on_apply
        self._attach_stats(group.name, msg.store_config)
        self.token = msg.channel_token
        if self.token:
            self.gate = TokenGate(self.token, group.name)
        self.listener = listen_channel(msg.channel_addr)
        self.listen_fd = self.listener.fileno()
        self.set_watch_fds([self.listen_fd])
        log.info("processor group=%s ready (max wait %d ms)", group.name, max_wait)
        self._tick()

    def _attach_stats(self, group: str, store_config: Any) -> None:
        """Publish this executor's queue figures (send, pull, query) and, for pull, the store's
        get counters into the broker's stats page (GET_BROKER_RUNTIME_INFO reads them)."""
        root = getattr(store_config, "storePathRootDir", None)
        off = queue_offset(group)
        if not root or off is None or self.host is None:
            return
        try:
            page = StatsPage(stats_path(root), writable=True)
        except OSError as exc:
            log.warning("group=%s no stats page: %s", group, exc)
            return
        self.host.stats = page
        self.host.stats_queue_off = off
        if group == "send":
            self.host.stats_lock_off = OFF_LOCK_SINCE_MS
        store = getattr(self.ctx, "store", None)
        if group == "pull" and store is not None and hasattr(store, "publish_stats"):
            store.stats_page = page

    def _on_notices(self, notices: list[Any], t: int) -> None:
        if not notices:  # re-check request: every held queue against the store now
            notices = self._held_queue_notices()
            if not notices:
                return
        woken = self.core.on_arrival(notices, t)
        if isinstance(woken, list):  # a core may return (conn_id, cmd) pairs, not use the outbox
            for conn_id, cmd in woken:
                self.outbox.send(conn_id, cmd)

    def _on_apply(self, blob: Any, t: int) -> None:
        """Replicated events from another processor, in channel order with requests (one that
        cannot be applied leaves the replica wrong: the exception ends the actor)."""
        for event in pickle.loads(blob):
            self.ctx.apply(event, t)

    def _rs_channel(self) -> Channel | None:
        """A live channel to the RemotingServer (not the send actor's notice channel)."""
        notice_src = self.host.notice_channel if self.host is not None else None
        for ch in self.channels.values():
            if ch is not notice_src and not ch.closed:
                return ch
        return None

    def _core_fds_changed(self) -> None:
        """Re-arm the watch only when the core's own descriptors changed (a rebuilt watch
        set rebuilds the epoll)."""
        core_fds = getattr(self.core, "watch_fds", None)
        if callable(core_fds) and set(core_fds()) != self._core_fds:
            self._update_watch()

    def _update_watch(self) -> None:
        fds = [self.listen_fd, *self.channels]
        if self.gate is not None:
            fds += self.gate.pending_fds()
        if self.notice_ch is not None and not self.notice_ch.closed:
            fds.append(self.notice_ch.fd)
        core_fds = getattr(self.core, "watch_fds", None)  # e.g. a slave's HA connection
        self._core_fds = set(core_fds()) if callable(core_fds) else set()
        fds += self._core_fds
        self.set_watch_fds(fds)

    def _held_queue_notices(self) -> list[Any]:
        """(topic, qid, max offset, None, 0) for every queue with held pulls (pull actor)."""
        table = getattr(getattr(self.core, "hold", None), "table", None)
        store = getattr(self.ctx, "store", None)
        if not table or store is None:
            return []
        notices = []
        for key in list(table):
            topic, _, qid = key.rpartition("@")
            try:
                notices.append(
                    (topic, int(qid), store.get_max_offset_in_queue(topic, int(qid)), None, 0)
                )
            except Exception:
                log.exception("group=%s re-check of %s failed", self.group, key)
        return notices

    def _holding(self) -> bool:
        """True when the pull core holds pulls (or when that cannot be known)."""
        hold = getattr(self.core, "hold", None)
        table = getattr(hold, "table", None)
        return True if table is None else bool(table)

    def _read_notice_channel(self, ch: Channel) -> None:
        """Send actor: HOLDS records from the pull actor."""
        records = ch.read_records()
        if records is None:
            log.warning("group=%s notice channel closed", self.group)
            self.unwatch(ch.fd)
            ch.close()
            self.notice_ch = None
            self._update_watch()
            return
        for rec in records:
            if rec[0] == HOLDS and self.gate_notices.on_holds(bool(rec[1])):
                # appends made before this record carried no notice: ask for a re-check
                add_notices(ch.out, [])
                self.outbox.dirty.add(ch)

    def on_ready(self, fds: list[int]) -> None:
        host = self.host
        if host is None:
            return
        mine = [fd for fd in fds if fd in self._core_fds]
        if mine:
            fds = [fd for fd in fds if fd not in self._core_fds]
            try:
                self.core.on_fd_ready(mine, now_ms())
            except Exception:
                log.exception("group=%s core fd handler failed", self.group)
            self._core_fds_changed()
        for fd in fds:
            if self.notice_ch is not None and fd == self.notice_ch.fd:
                self._read_notice_channel(self.notice_ch)
                continue
            if fd == self.listen_fd:
                if self.gate is not None:  # TCP: held until the token came (never waited for)
                    self.gate.accept(self.listener, time.monotonic())
                    self._expire_tokens()
                else:
                    for new_ch in accept_channels(self.listener, name=self.group):
                        self._add_channel(new_ch)
                self._update_watch()
                continue
            ch = self.channels.get(fd)
            if ch is None:
                gate = self.gate
                if gate is not None and fd in gate.pending_fds():
                    new = gate.ready(fd)
                    if new is not None:
                        self._add_channel(new)
                    self._update_watch()
                continue
            records = ch.read_records()
            if records is None:
                self._drop_channel(ch)
                continue
            step = REPLY_FLUSH_EVERY
            for start in range(0, len(records), step):
                mark = len(ch.out)
                chunk = records[start : start + step]
                host.handle(ch, chunk, len(records) - start - len(chunk))
                if ch is not host.notice_channel:
                    events = self.ctx.drain_events()
                    if events:  # ahead of this batch's replies: causal order for clients
                        ch.out[mark:mark] = events_record(self.group, events)
                        self.outbox.dirty.add(ch)
                if start + step < len(records):
                    ch.flush()  # the client decodes these replies while we run the rest
            if ch.closed:
                self._drop_channel(ch)
        self._after_batch()

    def _add_channel(self, ch: Channel) -> None:
        self.channels[ch.fd] = ch
        if self.outbox.default is None:
            self.outbox.default = ch

    def _expire_tokens(self) -> None:
        """Close TCP connections whose token is late; come back at the next deadline."""
        if self.gate is None:
            return
        before = len(self.gate.pending_fds())
        wait_s = self.gate.expire(time.monotonic())
        if wait_s is not None:
            self.schedule("tokens", wait_s * 1000.0 + 1.0)
        if len(self.gate.pending_fds()) != before:
            self._update_watch()

    def _drop_channel(self, ch: Channel) -> None:
        """A channel closed (its RemotingServer died, or the send actor's notices ended): the
        connections whose requests came on it are gone for this processor too."""
        self.unwatch(ch.fd)
        ch.close()
        self.channels.pop(ch.fd, None)
        if self.outbox.default is ch:
            self.outbox.default = next(iter(self.channels.values()), None)
        if self.host is not None and self.host.notice_channel is ch:
            self.host.notice_channel = None
        gone = [c for c, via in self.outbox.conn_channel.items() if via is ch]
        t = now_ms()
        for conn_id in gone:
            self.outbox.forget(conn_id)
            try:
                self.core.on_connection_closed(conn_id, t)
            except Exception:
                log.exception("group=%s on_connection_closed failed", self.group)
        self._update_watch()

    def _after_batch(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        release = getattr(self.core, "flush_and_release", None)
        if release is not None and getattr(self.core, "waiting", None):
            # SYNC_FLUSH group commit: one flush for the batch, then the replies (an exception
            # leaves them held: it ends the actor, and the store recovers in its replacement)
            release(now_ms())
            next_look = getattr(self.core, "next_look_ms", None)
            look = next_look(now_ms()) if callable(next_look) else 1  # parked: look again then
            if look is not None:
                self.schedule("tick", float(look))
        events = ctx.drain_events()
        if events:  # from timers, notices or control messages: no reply waits on them
            rs = self._rs_channel()
            if rs is not None:
                rs.out += events_record(self.group, events)
                self.outbox.dirty.add(rs)
            elif self.controller is not None:
                self.send(self.controller, BrokerEventBatch(self.group, events))
        if self.notice_ch is not None:
            notices = self.gate_notices.notices(ctx.drain_arrivals())
            if notices is not None:
                add_notices(self.notice_ch.out, notices)
                self.outbox.dirty.add(self.notice_ch)
        elif self.host is not None and self.host.on_notices is not None:
            report = self.holds.after_batch(self._holding())
            if report:
                self._report_holding(True)
            elif report is not None:  # hysteresis: a consumer re-polling at once keeps notices
                self.schedule("holds-off", HOLDS_OFF_DELAY_MS)
        self._flush()

    def _report_holding(self, holding: bool) -> None:
        src = self.host.notice_channel if self.host is not None else None
        if src is not None and not src.closed:
            add_holds(src.out, holding)
            self.outbox.dirty.add(src)
            self.holds.sent(holding)

    def _flush(self) -> None:
        outbox = self.outbox
        if not outbox.dirty:
            return
        still = {ch for ch in outbox.dirty if not ch.flush()}
        outbox.dirty = still
        if still:
            self.schedule("flush", FLUSH_RETRY_MS)

    def _tick(self) -> None:
        delay = MAX_TICK_MS
        publish = getattr(getattr(self.ctx, "store", None), "publish_stats", None)
        if publish is not None:
            publish()
        if self.core is not None:
            t0 = time.monotonic()
            nxt = self.core.tick(now_ms())  # an exception ends the actor (let it fail)
            spent_ms = (time.monotonic() - t0) * 1000.0
            if spent_ms > SLOW_TICK_MS:  # requests wait meanwhile (fast failure may answer busy)
                log.warning("group=%s tick took %.0f ms", self.group, spent_ms)
            if nxt is not None:
                delay = min(MAX_TICK_MS, max(1.0, float(nxt)))
            self._core_fds_changed()  # the core may have opened or closed a connection
        self.schedule("tick", delay)

    def on_timer(self, key: str) -> None:
        if key == "tick" and not self.store_closed:
            self._tick()
        elif key == "holds-off" and self.holds.quiet_delay_over(self._holding()):
            self._report_holding(False)
        elif key == "tokens":
            self._expire_tokens()
        self._after_batch()

    def _shutdown_store(self) -> tuple[bool, str]:
        if self.store_closed:
            return True, "already closed"
        self.store_closed = True
        store = getattr(self.ctx, "store", None)
        if store is None or not hasattr(store, "shutdown"):
            return True, "no store"
        try:
            self._after_batch()
            before = getattr(self.core, "before_store_shutdown", None)
            if callable(before):  # e.g. the send core persists its schedule offsets
                before(now_ms())
            store.shutdown(now_ms())
        except Exception as exc:
            log.exception("group=%s store shutdown failed", self.group)
            return False, f"{type(exc).__name__}: {exc}"
        log.info("group=%s store shut down cleanly", self.group)
        return True, "ok"

    def on_exit(self) -> None:
        if self.group == "send":
            self._shutdown_store()
        else:
            closer = getattr(self.core, "close", None)  # e.g. the pull core's stats, last time
            if callable(closer):
                try:
                    closer()
                except Exception:
                    log.exception("group=%s core close failed", self.group)
            store = getattr(self.ctx, "store", None)
            close = getattr(store, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    log.exception("group=%s store close failed", self.group)
        for ch in list(self.channels.values()):
            ch.close()
        if self.gate is not None:
            self.gate.close()
        if self.notice_ch is not None:
            self.notice_ch.close()
        if self.listener is not None:
            addr = listen_address(self.listener)
            self.listener.close()
            if isinstance(addr, str):
                try:
                    os.unlink(addr)
                except OSError:
                    pass


# -- controller actor --------------------------------------------------------------------------
class BrokerControllerActor(BrokerChildSupervisor):
    """Starts the broker's actors (and replaces the dead: actors.broker.supervision), owns its
    authoritative state, talks to name servers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_msg: StartBroker | None = None
        self.requester: Any = None
        self.personality: Any = None
        self.core: Any = None
        self.groups: list[Any] = []
        self.processors: dict[str, Any] = {}  # group -> ActorAddress
        self.channel_addrs: dict[str, Any] = {}
        self.channel_token = b""  # TCP processor channels only (Unix sockets are mode 0600)
        self.remoting: Any = None
        self.port = 0
        self.fast_port = 0
        self.state = "idle"
        self.stop_requester: Any = None
        self.ns_conns: dict[str, ClientConn] = {}
        self.pending_unregister = 0
        self.barriers: list[tuple[list[tuple[Any, int]], list[tuple[str, int]]]] = []
        self.store_ok = True
        self.store_detail = ""
        self.indexer: Any = None  # IndexServiceActor address (messageIndexDispatch=process)
        self.ns_down: set[str] = set()  # name servers whose connection was lost (logged once)
        self.ha: Any = None  # HAServiceActor address (a master with haListenPort != -1)
        self.master_conn: ClientConn | None = None  # a slave: to its master (SlaveSynchronize)
        self.master_conn_addr = ""
        self.master_pending: dict[int, int] = {}  # opaque -> request code

    # startup: send first (it recovers the store), then the others, then remoting
    def on_control(self, msg: Any, sender: Any) -> None:
        if self.on_supervision(msg):
            return
        if isinstance(msg, StartBroker):
            self.requester = sender
            try:
                self._begin(msg)
            except Exception as exc:
                log.exception("broker start failed")
                self._fail(f"{type(exc).__name__}: {exc}")
        elif isinstance(msg, ProcessorReady):
            self.channel_addrs[msg.group] = msg.channel_addr
            if self.state == "starting-send":
                self._start_indexer()  # after the writer recovered the store
                self._start_others()
            elif self.state == "starting-others" and len(self.channel_addrs) == len(self.groups):
                self._start_remoting()
        elif isinstance(msg, ProcessorStartFailed):
            self._fail(f"processor {msg.group}: {msg.reason}")
        elif isinstance(msg, RemotingReady):
            self.port = msg.port
            self.fast_port = int(getattr(msg, "fast_port", 0) or 0)
            if not self._start_ha():
                self._running()
        elif isinstance(msg, HAReady):
            log.info("HA service listening on port %d", msg.port)
            self.ha_port = msg.port
            set_port = getattr(self.core, "set_ha_port", None)
            if callable(set_port):
                set_port(msg.port)
            if self.state == "starting-ha":
                self._running()
        elif isinstance(msg, HAFailed):
            log.error("HA service failed: %s (no slave can replicate)", msg.reason)
            if self.state == "starting-ha":
                self._running()
        elif isinstance(msg, RemotingStartFailed):
            self._fail(f"remoting: {msg.reason}")
        elif isinstance(msg, BrokerEventBatch):
            self._on_events(msg.origin, msg.events, forward_them=True)
        elif isinstance(msg, EventsApplied):
            for origin, blob in msg.batches:
                try:
                    events = pickle.loads(blob)
                except Exception:
                    log.exception("undecodable events from %s", origin)
                    continue
                self._on_events(origin, events, forward_them=False)
        elif isinstance(msg, StopBroker):
            if not self.answer_stop_when_stopped(sender):
                self._stop(sender)
        elif isinstance(msg, RemotingStopped):
            self._shutdown_store()
        elif isinstance(msg, StoreShutdownDone):
            self._after_store(msg)
        elif isinstance(msg, IndexerReady):
            log.info("index service ready at phy=%d", msg.next_phy)
        elif isinstance(msg, IndexerFailed):
            log.error("index service failed: %s (queries scan the commit log)", msg.reason)
        elif isinstance(msg, IndexerStopped) and self.state == "stopping-index":
            self.release(INDEX)
            self.indexer = None
            self._after_index()

    def _running(self) -> None:
        """Everything listens: register with the name servers and tell the launcher."""
        self.state = "running"
        self._register(first=True)
        bc = self.start_msg.broker_config if self.start_msg else None
        host = getattr(bc, "brokerIP1", "127.0.0.1")
        self.send(self.requester, BrokerStarted(f"{host}:{self.port}", self.port, self.fast_port))
        self.report_pids()
        self._tick()

    def _start_ha(self) -> bool:
        """A master's HA service (HAService.AcceptSocketService), on haListenPort (0: listenPort
        + 1, or a free port when that is taken and was only derived); False when none runs."""
        msg = self.start_msg
        if msg is None or "send" not in self.processors:
            return False
        bc, sc = msg.broker_config, msg.store_config
        configured = int(getattr(sc, "haListenPort", 0))
        if configured < 0 or str(getattr(bc, "brokerRole", "")).upper() == "SLAVE":
            return False
        port = self.ha_port or configured or self.port + 1  # a replacement: the port bound
        if self.state != "running":
            self.state = "starting-ha"
        self.ha = self.createActor(HAServiceActor)
        self.track(HA, self.ha)
        self.send(self.ha, StartHA(
            sc, msg.host, port, str(getattr(bc, "brokerRole", "")).upper() == "SYNC_MASTER",
            free_port_fallback=configured == 0 and not self.ha_port, runtime_dir=msg.runtime_dir,
        ))  # fmt: skip
        return True

    def _begin(self, msg: StartBroker) -> None:
        msg = dataclasses.replace(msg, store_config=broker_store_config(msg.store_config))
        self.start_msg = msg
        self.personality = load_personality(msg.personality)
        os.makedirs(msg.runtime_dir, mode=0o700, exist_ok=True)
        self.core = self.personality.make_controller(msg.broker_config, msg.store_config, now_ms(),
                                                     msg.runtime_dir)  # fmt: skip
        self.groups = list(self.personality.GROUPS)
        for group in self.groups:
            addr = self.createActor(ProcessorActor)
            self.processors[group.name] = addr
            self.track(group.name, addr)
        self.state = "starting-send"
        first = "send" if "send" in self.processors else self.groups[0].name
        self._start_processor(first)

    def _start_processor(self, group: str) -> None:
        msg = self.start_msg
        assert msg is not None
        bc = msg.broker_config
        path: Any = os.path.join(msg.runtime_dir, f"{group}.sock")
        if str(getattr(bc, "processorChannel", "unix")).lower() == "tcp":
            path = (str(getattr(bc, "processorChannelHost", "127.0.0.1")), 0)
            if not self.channel_token:
                self.channel_token = channel_token()
        self.send(
            self.processors[group],
            StartProcessor(
                group,
                msg.broker_config,
                msg.store_config,
                path,
                self._snapshot(),
                self.myAddress,
                msg.personality,
                self.channel_token,
                msg.runtime_dir,
            ),
        )

    def _snapshot(self) -> Any:
        snap = getattr(self.core, "snapshot", None)
        return snap() if callable(snap) else None

    def _start_indexer(self) -> None:
        """Start (or restart) the IndexService actor when the index is built outside the writer."""
        msg = self.start_msg
        sc = msg.store_config if msg is not None else None
        if "send" not in self.processors or getattr(sc, "index_mode", "") != "process":
            return
        self.indexer = self.createActor(IndexServiceActor)
        self.track(INDEX, self.indexer)
        self.send(self.indexer, StartIndexer(sc))

    def _start_others(self) -> None:
        self.state = "starting-others"
        started = set(self.channel_addrs)
        rest = [g.name for g in self.groups if g.name not in started]
        if not rest:
            self._start_remoting()
            return
        for name in rest:
            self._start_processor(name)

    def _start_remoting(self) -> None:
        msg = self.start_msg
        assert msg is not None
        self.state = "starting-remoting"
        if "send" in self.processors and "pull" in self.channel_addrs:
            self.send(self.processors["send"],
                      ConnectNotices(self.channel_addrs["pull"], self.channel_token))  # fmt: skip
        self.remoting = self.createActor("actors.remoting.actor.RemotingServer")
        self.track(REMOTING, self.remoting)
        bc = msg.broker_config
        self.send(self.remoting, self.remoting_start(int(getattr(bc, "listenPort", 0)),
                                                     getattr(bc, "fastListenPort", None)))

    def _fail(self, reason: str) -> None:
        log.error("broker start failed: %s", reason)
        if self.state != "failed" and self.requester is not None:
            self.send(self.requester, BrokerStartFailed(reason))
        self.state = "failed"

    # replicated state
    def _on_events(self, origin: str, events: list[Any], forward_them: bool) -> None:
        """Apply events; forward them unless the RemotingServer already delivered them."""
        t = now_ms()
        # an exception here leaves the authoritative state unknown: it ends this actor (let it
        # fail: actors.runtime.watch) and the broker is started again from its files
        forward, register = self.core.route_events(events, origin, t)
        if forward_them:
            for group, evs in forward.items():
                if group in self.processors and evs:
                    self.send(self.processors[group], BrokerEventBatch(origin, evs))
        take_versions = getattr(self.core, "take_version_events", None)
        if callable(take_versions):  # the controller's own: sent whoever delivered the batch
            for group, evs in take_versions().items():
                if group in self.processors and evs:
                    self.send(self.processors[group], BrokerEventBatch("controller", evs))
        take = getattr(self.core, "take_barriers", None)
        barriers = list(take()) if callable(take) else []
        waits: list[tuple[Any, int]] = []
        if register and self.state == "running":
            waits = self._register(first=False)
        if barriers:
            self.barriers.append((waits, barriers))
            self._check_barriers()

    def _check_barriers(self) -> None:
        """Release held replies whose registration every live name server has answered."""
        if not self.barriers:
            return
        live = set(map(id, self.ns_conns.values()))
        keep = []
        for waits, tokens in self.barriers:
            done = all(c.closed or id(c) not in live or c.answered >= n for c, n in waits)
            if not done:
                keep.append((waits, tokens))
                continue
            for origin, token in tokens:
                if origin in self.processors:
                    self.send(self.processors[origin], ReleaseBarrier(token))
        self.barriers = keep

    # name servers
    def _register(self, first: bool) -> list[tuple[Any, int]]:
        """Send REGISTER_BROKER to every name server; (conn, its request count) to wait for."""
        try:
            requests = self.core.register_requests(now_ms())
        except Exception:
            log.exception("building REGISTER_BROKER failed")
            return []
        self._send_ns(requests)
        addrs = {addr for addr, _cmd in requests}
        return [(c, c.sent) for a, c in self.ns_conns.items() if a in addrs]

    def _send_ns(self, requests: list[tuple[str, Any]]) -> int:
        sent = 0
        for addr, cmd in requests:
            conn = self.ns_conns.get(addr)
            if conn is None or conn.closed:
                host, _, port = addr.rpartition(":")
                try:
                    conn = ClientConn((host, int(port)))
                except (OSError, ValueError) as exc:
                    log.warning("name server %s unreachable: %s", addr, exc)
                    continue
                self.ns_conns[addr] = conn
            conn.out += cmd.encode()
            conn.sent += 1
            sent += 1
        self._flush_ns()
        return sent

    def _flush_ns(self) -> None:
        pending = False
        for addr, conn in list(self.ns_conns.items()):
            if not conn.flush():
                pending = True
            if conn.closed:
                self._ns_lost(addr, conn)
        if pending:
            self.schedule("ns-flush", 20)
        fds = [c.fd for c in self.ns_conns.values()]
        mc = self.master_conn
        if mc is not None and not mc.closed:
            fds.append(mc.fd)
        self.set_watch_fds(fds)
        if self.barriers:
            self._check_barriers()

    def _ns_lost(self, addr: str, conn: ClientConn) -> None:
        """A name server connection closed (the name server restarted, or is down): register
        again within NS_RETRY_MS rather than at the next period, so a replaced name server
        gets this broker's routes back at once (tried each NS_RETRY_MS while it is down)."""
        self.unwatch(conn.fd)
        conn.close()
        if self.ns_conns.get(addr) is conn:
            del self.ns_conns[addr]
        first = addr not in self.ns_down
        if first:
            self.ns_down.add(addr)
            log.warning("name server %s connection lost: registering again every %.0f ms until "
                        "it answers", addr, NS_RETRY_MS)  # fmt: skip
        if self.state == "running":
            self.schedule("register", NS_FIRST_RETRY_MS if first else NS_RETRY_MS)

    def on_ready(self, fds: list[int]) -> None:
        mc = self.master_conn
        if mc is not None and mc.fd in fds:
            self._read_master(mc)
        for addr, conn in list(self.ns_conns.items()):
            if conn.fd not in fds:
                continue
            frames = conn.read_frames()
            if frames is None:
                self._ns_lost(addr, conn)
                continue
            if frames and addr in self.ns_down:
                self.ns_down.discard(addr)
                log.info("name server %s answers again", addr)
            for frame in frames:
                conn.answered += 1
                self._on_ns_response(addr, frame)
        self._flush_ns()
        self._check_barriers()

    def _on_ns_response(self, addr: str, frame: Any) -> None:
        from protocol.command import RemotingCommand

        try:
            cmd = RemotingCommand.decode(frame)
        except Exception as exc:
            log.warning("bad frame from name server %s: %s", addr, exc)
            return
        handler = getattr(self.core, "on_namesrv_response", None)
        if callable(handler):
            handler(addr, cmd, now_ms())
        elif cmd.code != 0:
            log.warning("name server %s answered code=%d remark=%s", addr, cmd.code, cmd.remark)
        order = getattr(self.core, "order_topic_events", None)
        events = order(addr, cmd) if callable(order) and self.state == "running" else []
        if events:  # the name server's order topic list (updateOrderTopicConfig)
            self._on_events("controller", events, forward_them=True)
        take = getattr(self.core, "take_master_change", None)
        changes = take() if callable(take) else {}
        for group, evs in changes.items():
            if group in self.processors and evs:
                self.send(self.processors[group], BrokerEventBatch("controller", evs))
        if changes:
            self._slave_sync()
        if self.state == "stopping-unregister":
            self.pending_unregister -= 1
            if self.pending_unregister <= 0:
                self._finish_stop()

    # periodic work
    def _tick(self) -> None:
        bc = self.start_msg.broker_config if self.start_msg else None
        period = float(getattr(bc, "registerNameServerPeriod", 30000))
        period = min(60000.0, max(10000.0, period))
        self.schedule("register", period)
        self.schedule("persist", float(getattr(bc, "flushConsumerOffsetInterval", 5000)))
        self.schedule("core", MAX_TICK_MS)
        if getattr(bc, "is_slave", False):
            self.schedule("slave-sync", SLAVE_SYNC_MS)

    def on_timer(self, key: str) -> None:
        bc = self.start_msg.broker_config if self.start_msg else None
        if self.on_replace_timer(key):
            return
        if key == "ns-flush":
            self._flush_ns()
            return
        if key == "stop-timeout":
            if self.state.startswith("stopping"):
                log.warning("shutdown step %s timed out", self.state)
                if self.state == "stopping-remoting":
                    self._shutdown_store()
                elif self.state == "stopping-store":
                    self._after_store(StoreShutdownDone(False, "timeout"))
                elif self.state == "stopping-index":
                    self._after_index()
                else:
                    self._finish_stop()
            return
        if self.state != "running":
            return
        if key == "slave-sync":
            self._slave_sync()
            self.schedule("slave-sync", SLAVE_SYNC_MS)
            return
        if key == "register":
            self._register(first=False)
            period = float(getattr(bc, "registerNameServerPeriod", 30000))
            self.schedule("register", min(60000.0, max(10000.0, period)))
        elif key == "persist":
            try:
                self.core.persist(now_ms())
            except Exception:
                log.exception("persisting consumer offsets failed")
            self.schedule("persist", float(getattr(bc, "flushConsumerOffsetInterval", 5000)))
        elif key == "core":
            delay = MAX_TICK_MS
            nxt = self.core.tick(now_ms())  # an exception ends the actor (let it fail)
            if nxt is not None:
                delay = min(MAX_TICK_MS, max(1.0, float(nxt)))
            self.schedule("core", delay)

    # a slave: SlaveSynchronize (topics, offsets, delay offsets, groups from the master)
    def _slave_sync(self) -> None:
        master = getattr(self.core, "master_addr", "")
        if self.state != "running" or not master:
            return
        mc = self.master_conn
        if mc is None or mc.closed or self.master_conn_addr != master:
            if mc is not None:
                self.unwatch(mc.fd)  # before close: a child forked since may hold it too
                mc.close()
            host, _, port = master.rpartition(":")
            try:
                mc = ClientConn((host, int(port)))
            except (OSError, ValueError) as exc:
                log.warning("master %s unreachable: %s", master, exc)
                self.master_conn = None
                return
            self.master_conn, self.master_conn_addr = mc, master
            self.master_pending.clear()
        from protocol.command import RemotingCommand

        if self.master_pending:  # the last round is still unanswered: no second one on top
            log.warning("master %s has not answered the last sync: skipping this one", master)
            self.master_pending.clear()  # answers still to come are ignored; resend next time
            return
        for code in getattr(self.core, "slave_sync_codes", ()):
            cmd = RemotingCommand.request(code)
            self.master_pending[cmd.opaque] = int(code)
            mc.out += cmd.encode()
        mc.flush()
        self._flush_ns()  # re-arms the watch, the master connection included

    def _read_master(self, mc: ClientConn) -> None:
        from protocol.command import RemotingCommand

        frames = mc.read_frames()
        if frames is None:
            log.info("master %s closed the sync connection", self.master_conn_addr)
            self.unwatch(mc.fd)
            mc.close()
            self.master_conn = None
            self._flush_ns()
            return
        for frame in frames:
            try:
                resp = RemotingCommand.decode(frame)
            except Exception as exc:
                log.warning("bad frame from master %s: %s", self.master_conn_addr, exc)
                continue
            code = self.master_pending.pop(resp.opaque, None)
            if code is None:
                continue
            if resp.code != 0:
                log.warning("master %s answered code=%d to %d: %s", self.master_conn_addr,
                            resp.code, code, resp.remark)  # fmt: skip
                continue
            try:
                events = self.core.slave_sync_events(code, bytes(resp.body or b""))
            except Exception:
                log.exception("slave sync of code %d failed", code)
                continue
            if events:
                self._on_events("controller", events, forward_them=True)

    # shutdown: remoting -> store -> persist -> unregister -> reply
    def _stop(self, sender: Any) -> None:
        if sender is not None:
            self.stop_requester = sender
        if self.state.startswith("stopping"):
            return  # a stop under way (the broker stopping itself): it answers this one too
        if self.state != "running":
            self.state = "stopping-store"
            self._shutdown_store()
            return
        self.state = "stopping-remoting"
        if self.ha is not None:  # slaves see the master go
            self.release(HA)
            self.send(self.ha, ActorExitRequest())
            self.ha = None
        if self.master_conn is not None:
            self.unwatch(self.master_conn.fd)
            self.master_conn.close()
            self.master_conn = None
        if self.remoting is None:  # given up on: nothing listens any more
            self._shutdown_store()
            return
        self.send(self.remoting, StopRemoting())
        self.schedule("stop-timeout", 3000)

    def _shutdown_store(self) -> None:
        if "send" in self.processors and self.state in ("stopping-remoting", "stopping-store"):
            self.state = "stopping-store"
            self.send(self.processors["send"], ShutdownStore())
            self._timer_due.pop("stop-timeout", None)
            self.schedule("stop-timeout", 10000)
        elif self.state in ("stopping-remoting", "stopping-store"):
            self.state = "stopping-store"  # no writer (none, or given up on): next step
            self._after_store(StoreShutdownDone(True, "no store"))

    def _after_store(self, msg: StoreShutdownDone) -> None:
        if self.state != "stopping-store":
            return
        self.store_ok = msg.ok
        self.store_detail = msg.detail
        if self.indexer is not None:  # the writer is closed: index up to its final offset
            self.state = "stopping-index"
            self.send(self.indexer, StopIndexer())
            self._timer_due.pop("stop-timeout", None)
            self.schedule("stop-timeout", 30000)
            return
        self._after_index()

    def _after_index(self) -> None:
        try:
            if self.core is not None:
                self.core.shutdown(now_ms())
        except Exception:
            log.exception("persisting at shutdown failed")
        requests: list[tuple[str, Any]] = []
        try:
            if self.core is not None:
                requests = self.core.unregister_requests()
        except Exception:
            log.exception("building UNREGISTER_BROKER failed")
        self.state = "stopping-unregister"
        self.pending_unregister = self._send_ns(requests)
        if self.pending_unregister == 0:
            self._finish_stop()
        else:
            self._timer_due.pop("stop-timeout", None)
            self.schedule("stop-timeout", 3000)

    def _finish_stop(self) -> None:
        if self.state == "stopped":
            return
        self.state = "stopped"
        self.set_watch_fds([])
        for conn in self.ns_conns.values():
            conn.close()
        self.ns_conns.clear()
        if self.stop_requester is not None:
            self.send(self.stop_requester, BrokerStopped(self.store_ok, self.store_detail))

    def on_exit(self) -> None:
        self.state = "stopped"  # the actor system stops: children exiting now are no deaths
        for conn in self.ns_conns.values():
            conn.close()
