"""BrokerControllerActor: the top of one broker, its processors' and services' supervisor.

Mirrors broker/BrokerController.java (initialize/start/shutdown, one executor per processor
group, registerBrokerAll every registerNameServerPeriod, persisting consumer offsets every
flushConsumerOffsetInterval), RocketMQ 4.9.x. Each processor group runs in a ProcessorActor
(actors.broker.processor_actor); the class's personality (actors.broker.personality) says
which. A slave's SlaveSynchronize connection is actors.broker.slave_synchronize.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
from collections.abc import Callable
from typing import Any, ClassVar

from thespian.actors import ActorAddress, ActorExitRequest

from actors.broker.config import BrokerConfig
from actors.broker.ha import HAServiceActor
from actors.broker.index_service import IndexServiceActor, broker_store_config
from actors.broker.personality import (
    BROKER,
    BarrierController,
    BrokerPersonality,
    ControllerCore,
    HaController,
    NamesrvController,
    VersionedController,
)
from actors.broker.processor_actor import ProcessorActor
from actors.broker.slave_synchronize import SlaveSynchronize
from actors.broker.supervision import HA, INDEX, REMOTING, BrokerChildSupervisor
from actors.core import ProcessorGroup
from actors.runtime.channel import ChannelAddr
from actors.runtime.client_conn import ClientConn
from actors.runtime.messages import (
    BrokerEventBatch,
    BrokerStarted,
    BrokerStartFailed,
    BrokerStopped,
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
from actors.runtime.token_gate import channel_token
from actors.runtime.watch import now_ms
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)
MAX_TICK_MS = 1000.0
SLAVE_SYNC_MS = 10_000.0  # SlaveSynchronize period (BrokerController: every 10 s)
NS_FIRST_RETRY_MS = 200.0  # a lost name server connection: register again this soon,
NS_RETRY_MS = 1000.0  # then this often until it answers


def _register_period_ms(bc: BrokerConfig) -> float:
    """registerNameServerPeriod, kept within 10-60 s as BrokerController does."""
    return min(60000.0, max(10000.0, float(bc.registerNameServerPeriod)))


# -- controller actor --------------------------------------------------------------------------
class BrokerControllerActor(BrokerChildSupervisor):
    """Starts the broker's actors (and replaces the dead: actors.broker.supervision), owns its
    authoritative state, talks to name servers."""

    PERSONALITY: ClassVar[BrokerPersonality] = BROKER  # its groups and controller core
    PROCESSOR_ACTOR: ClassVar[type[ProcessorActor]] = ProcessorActor  # hosts each group

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.start_msg: StartBroker | None = None
        self.requester: ActorAddress | None = None
        self.core: ControllerCore | None = None
        # the core's optional capabilities (actors.broker.personality), looked up once in _begin
        self.take_version_events: Callable[[], dict[str, list[Any]]] | None = None
        self.take_barriers: Callable[[], list[tuple[str, int]]] | None = None
        self.ns_core: NamesrvController | None = None
        self.ha_core: HaController | None = None
        self.groups: list[ProcessorGroup] = []
        self.processors: dict[str, ActorAddress] = {}
        self.channel_addrs: dict[str, ChannelAddr] = {}
        self.channel_token = b""  # TCP processor channels only (Unix sockets are mode 0600)
        self.remoting: ActorAddress | None = None
        self.port = 0
        self.fast_port = 0
        self.state = "idle"
        self.stop_requester: ActorAddress | None = None
        self.ns_conns: dict[str, ClientConn] = {}
        self.pending_unregister = 0
        self.barriers: list[tuple[list[tuple[ClientConn, int]], list[tuple[str, int]]]] = []
        self.store_ok = True
        self.store_detail = ""
        self.indexer: ActorAddress | None = None  # IndexServiceActor (messageIndexDispatch=process)
        self.ns_down: set[str] = set()  # name servers whose connection was lost (logged once)
        self.ha: ActorAddress | None = None  # HAServiceActor (a master with haListenPort != -1)
        self.slave_sync = SlaveSynchronize(self.unwatch)  # a slave: to its master

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
            self.fast_port = msg.fast_port
            if not self._start_ha():
                self._running()
        elif isinstance(msg, HAReady):
            log.info("HA service listening on port %d", msg.port)
            self.ha_port = msg.port
            if self.ha_core is not None:
                self.ha_core.set_ha_port(msg.port)
            self.wire_links(HA)
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
        assert self.start_msg is not None  # started
        host = self.start_msg.broker_config.brokerIP1
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
        configured = sc.haListenPort
        if configured < 0 or bc.is_slave:
            return False
        port = self.ha_port or configured or self.port + 1  # a replacement: the port bound
        if self.state != "running":
            self.state = "starting-ha"
        self.ha = self.createActor(HAServiceActor)
        self.track(HA, self.ha)
        self.send(self.ha, StartHA(
            sc, msg.host, port, bc.brokerRole.upper() == "SYNC_MASTER",
            free_port_fallback=configured == 0 and not self.ha_port, runtime_dir=msg.runtime_dir,
        ))  # fmt: skip
        return True

    def _begin(self, msg: StartBroker) -> None:
        msg = dataclasses.replace(msg, store_config=broker_store_config(msg.store_config))
        self.start_msg = msg
        self.slave_sync.tls = msg.tls
        os.makedirs(msg.runtime_dir, mode=0o700, exist_ok=True)
        self.core = core = self.PERSONALITY.make_controller(
            msg.broker_config, msg.store_config, now_ms(), msg.runtime_dir)  # fmt: skip
        if isinstance(core, VersionedController):
            self.take_version_events = core.take_version_events
        if isinstance(core, BarrierController):
            self.take_barriers = core.take_barriers
        self.ns_core = core if isinstance(core, NamesrvController) else None
        self.ha_core = core if isinstance(core, HaController) else None
        bc = msg.broker_config  # the services a broker of this role runs (e.g. no txcheck on
        self.groups = [g for g in self.PERSONALITY.GROUPS  # a slave)
                       if g.runs_on is None or g.runs_on(bc)]  # fmt: skip
        for group in self.groups:
            addr = self.createActor(self.PROCESSOR_ACTOR)
            self.processors[group.name] = addr
            self.track(group.name, addr)
        self.state = "starting-send"
        first = "send" if "send" in self.processors else self.groups[0].name
        self._start_processor(first)

    def _start_processor(self, group: str) -> None:
        msg, core = self.start_msg, self.core
        assert msg is not None and core is not None
        bc = msg.broker_config
        path: ChannelAddr = os.path.join(msg.runtime_dir, f"{group}.sock")
        if bc.processorChannel.lower() == "tcp":
            path = (bc.processorChannelHost, 0)
            if not self.channel_token:
                self.channel_token = channel_token()
        self.send(
            self.processors[group],
            StartProcessor(
                group,
                msg.broker_config,
                msg.store_config,
                path,
                core.snapshot(),
                self.myAddress,
                self.channel_token,
                msg.runtime_dir,
            ),
        )

    def _start_indexer(self) -> None:
        """Start (or restart) the IndexService actor when the index is built outside the writer."""
        msg = self.start_msg
        if msg is None or "send" not in self.processors:
            return
        sc = msg.store_config
        if sc.index_mode != "process":
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
        self.wire_links(None)  # every processor and service listens: link them
        self.remoting = self.createActor("actors.remoting.actor.RemotingServer")
        self.track(REMOTING, self.remoting)
        bc = msg.broker_config
        self.send(self.remoting, self.remoting_start(bc.listenPort, bc.fastListenPort))

    def _fail(self, reason: str) -> None:
        log.error("broker start failed: %s", reason)
        if self.state != "failed" and self.requester is not None:
            self.send(self.requester, BrokerStartFailed(reason))
        self.state = "failed"

    # replicated state
    def _on_events(self, origin: str, events: list[Any], forward_them: bool) -> None:
        """Apply events; forward them unless the RemotingServer already delivered them."""
        t = now_ms()
        assert self.core is not None
        # an exception here leaves the authoritative state unknown: it ends this actor (let it
        # fail: actors.runtime.watch) and the broker is started again from its files
        forward, register = self.core.route_events(events, origin, t)
        if forward_them:
            for group, evs in forward.items():
                if group in self.processors and evs:
                    self.send(self.processors[group], BrokerEventBatch(origin, evs))
        if self.take_version_events is not None:  # the controller's own: sent whoever
            for group, evs in self.take_version_events().items():  # delivered the batch
                if group in self.processors and evs:
                    self.send(self.processors[group], BrokerEventBatch("controller", evs))
        barriers = list(self.take_barriers()) if self.take_barriers is not None else []
        waits: list[tuple[ClientConn, int]] = []
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
    def _register(self, first: bool) -> list[tuple[ClientConn, int]]:
        """Send REGISTER_BROKER to every name server; (conn, its request count) to wait for."""
        assert self.core is not None
        try:
            requests = self.core.register_requests(now_ms())
        except Exception:
            log.exception("building REGISTER_BROKER failed")
            return []
        self._send_ns(requests)
        addrs = {addr for addr, _cmd in requests}
        return [(c, c.sent) for a, c in self.ns_conns.items() if a in addrs]

    def _send_ns(self, requests: list[tuple[str, RemotingCommand]]) -> int:
        sent = 0
        for addr, cmd in requests:
            conn = self.ns_conns.get(addr)
            if conn is None or conn.closed:
                try:
                    conn = ClientConn.to(addr, self.start_msg.tls if self.start_msg else None)
                except (OSError, ValueError) as exc:
                    log.warning("name server %s unreachable: %s", addr, exc)
                    continue
                self.ns_conns[addr] = conn
            conn.write(cmd.encode())
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
        master_fd = self.slave_sync.fd()
        if master_fd is not None:
            fds.append(master_fd)
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
        mc, ha = self.slave_sync.conn, self.ha_core
        if (mc is not None and mc.fd in fds and ha is not None  # open once ha_core asked
                and not self.slave_sync.read(ha.slave_sync_events, self._on_master_events)):
            self._flush_ns()  # the master closed it: no longer watched
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

    def _on_ns_response(self, addr: str, frame: bytes | memoryview) -> None:
        try:
            cmd = RemotingCommand.decode(frame)
        except ProtocolError as exc:
            log.warning("bad frame from name server %s: %s", addr, exc)
            return
        ns = self.ns_core
        if ns is not None:
            ns.on_namesrv_response(addr, cmd, now_ms())
        elif cmd.code != 0:
            log.warning("name server %s answered code=%d remark=%s", addr, cmd.code, cmd.remark)
        running = self.state == "running"
        events = ns.order_topic_events(addr, cmd) if ns is not None and running else []
        if events:  # the name server's order topic list (updateOrderTopicConfig)
            self._on_events("controller", events, forward_them=True)
        changes = self.ha_core.take_master_change() if self.ha_core is not None else {}
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
        assert self.start_msg is not None  # running
        bc = self.start_msg.broker_config
        self.schedule("register", _register_period_ms(bc))
        self.schedule("persist", float(bc.flushConsumerOffsetInterval))
        self.schedule("core", MAX_TICK_MS)
        if bc.is_slave:
            self.schedule("slave-sync", SLAVE_SYNC_MS)

    def on_timer(self, key: str) -> None:
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
        assert self.start_msg is not None  # running
        bc = self.start_msg.broker_config
        if key == "slave-sync":
            self._slave_sync()
            self.schedule("slave-sync", SLAVE_SYNC_MS)
            return
        if key == "register":
            self._register(first=False)
            self.schedule("register", _register_period_ms(bc))
            return
        assert self.core is not None  # running
        if key == "persist":
            try:
                self.core.persist(now_ms())
            except Exception:
                log.exception("persisting consumer offsets failed")
            self.schedule("persist", float(bc.flushConsumerOffsetInterval))
        elif key == "core":
            delay = MAX_TICK_MS
            nxt = self.core.tick(now_ms())  # an exception ends the actor (let it fail)
            if nxt is not None:
                delay = min(MAX_TICK_MS, max(1.0, float(nxt)))
            self.schedule("core", delay)

    # a slave: SlaveSynchronize (topics, offsets, delay offsets, groups from the master)
    def _slave_sync(self) -> None:
        ha = self.ha_core
        master = ha.master_addr if ha is not None else ""
        if self.state != "running" or ha is None or not master:
            return
        if self.slave_sync.request(master, ha.slave_sync_codes):
            self._flush_ns()  # re-arms the watch, the master connection included

    def _on_master_events(self, events: list[Any]) -> None:
        self._on_events("controller", events, forward_them=True)

    # shutdown: remoting -> store -> persist -> unregister -> reply
    def _stop(self, sender: ActorAddress | None) -> None:
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
        self.slave_sync.close()
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
        requests: list[tuple[str, RemotingCommand]] = []
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
