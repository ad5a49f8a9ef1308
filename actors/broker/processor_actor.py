"""ProcessorActor: one processor group (send, pull, admin, ...) or service in its own process.

Mirrors the executor side of remoting/netty/NettyRemotingAbstract.java (processRequestCommand
on a processor's own executor) and BrokerController.registerProcessor, RocketMQ 4.9.x; the
broker's services (hold, transfer, schedule, txcheck) are hosted the same way. Requests reach a
ProcessorActor over its direct channel (actors.runtime.channel), never as Thespian messages;
Thespian carries only startup, replicated-state events, link set-up and shutdown. Channels a
processor accepts say what they are in their first record: a RemotingServer's, or a link from
another actor (actors.runtime.links), whose records go to the core's LinkedCore methods.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import time
from typing import Any, ClassVar

from actors.acl.plain_access_validator import PlainAccessValidator
from actors.broker.personality import BROKER, BrokerPersonality, HostedContext, ProcessorContext
from actors.core import (
    BarrierCore,
    BatchEndCore,
    ClosingCore,
    ConnectionLossCore,
    FdWatchingCore,
    FlushedCore,
    GroupCommitCore,
    LinkedCore,
    ObservedHoldCore,
    ProcessorCore,
    StoreShutdownCore,
)
from actors.runtime.channel import (
    LINK,
    REPLY,
    REQUEST,
    Channel,
    accept_channels,
    events_record,
    listen_address,
    listen_channel,
)
from actors.runtime.direct_reply import DirectReplies
from actors.runtime.link_records import decode
from actors.runtime.links import REMOTING_HELLO, ChannelLink, LinkTable, hello_of
from actors.runtime.messages import (
    BrokerEventBatch,
    ConnectLink,
    ProcessorReady,
    ProcessorStartFailed,
    ReleaseBarrier,
    ShutdownStore,
    StartProcessor,
    StoreShutdownDone,
)
from actors.runtime.processor_host import ChannelOutbox, ProcessorHost
from actors.runtime.request_ledger import LedgerHolds, LedgerWriter
from actors.runtime.tcp import FD_RESERVE, raise_fd_limit
from actors.runtime.token_gate import TokenGate
from actors.runtime.watch import WatchingActor, now_ms
from protocol.command import RemotingCommand
from store.config import StoreConfig
from store.stats_page import OFF_LOCK_SINCE_MS, StatsPage, queue_offset, stats_path

log = logging.getLogger(__name__)
MAX_TICK_MS = 1000.0
SLOW_TICK_MS = 50.0
FLUSH_RETRY_MS = 1.0


# -- processor actor -----------------------------------------------------------------------
class ProcessorActor(WatchingActor):
    """Hosts one processor core: reads its channel in batches, writes replies back."""

    PERSONALITY: ClassVar[BrokerPersonality] = BROKER  # where its group's core comes from
    LINGER_IDLE_MS = 5.0
    LINGER_CAP_MS = 50.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group = ""
        self.flush_every = 16  # ProcessorGroup.reply_flush_every, once started
        self.host: ProcessorHost | None = None
        self.ctx: ProcessorContext | None = None
        self.core: ProcessorCore | None = None
        self.group_commit: GroupCommitCore | None = None  # the core's capabilities, once
        self.fd_core: FdWatchingCore | None = None
        self.loss_core: ConnectionLossCore | None = None
        self.batch_end: BatchEndCore | None = None
        self.flushed: FlushedCore | None = None
        self.linked: LinkedCore | None = None  # a core with links to other actors
        self.unsorted: set[int] = set()  # accepted channels that have not said what they are
        self.rs_chs: list[Channel] = []  # the channels from RemotingServers, oldest first
        self.outbox: ChannelOutbox = ChannelOutbox()
        self.links = LinkTable("", self.outbox)
        self.listener: socket.socket | None = None
        self.token = b""  # TCP channels: what a connection must send first
        self.gate: TokenGate | None = None  # TCP channels waiting for their token
        self.listen_fd = -1
        self.channels: dict[int, Channel] = {}
        self.ledgers: dict[Channel, LedgerWriter] = {}  # a holding group's, per RS channel
        self._core_fds: set[int] = set()  # descriptors the core asked to watch (watch_fds)
        self.controller: object = None  # the controller's ActorAddress, once started
        self.store_closed = False

    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartProcessor):
            try:
                self._start(msg)
            except Exception as exc:
                log.exception("processor group=%s failed to start", msg.group)
                self.send(sender, ProcessorStartFailed(msg.group, f"{type(exc).__name__}: {exc}"))
                return
            assert self.listener is not None  # started
            self.send(sender, ProcessorReady(msg.group, listen_address(self.listener)))
        elif isinstance(msg, BrokerEventBatch):
            if self.ctx is not None:
                t = now_ms()
                for event in msg.events:  # a replica that cannot apply one ends the actor
                    self.ctx.apply(event, t)
                self._after_batch()
        elif isinstance(msg, ReleaseBarrier):
            if isinstance(self.core, BarrierCore):
                try:
                    self.core.release(msg.token, now_ms())
                except Exception:
                    log.exception("group=%s release(%d) failed", self.group, msg.token)
            self._after_batch()
        elif isinstance(msg, ConnectLink):
            self._open_link(msg)
        elif isinstance(msg, ShutdownStore):
            ok, detail = self._shutdown_store()
            self.send(sender, StoreShutdownDone(ok, detail))

    def process_role(self) -> str:
        """The processor group, once started."""
        return self.group or super().process_role()

    def _start(self, msg: StartProcessor) -> None:
        groups = {g.name: g for g in self.PERSONALITY.GROUPS}
        group = groups[msg.group]
        self.group = group.name
        self.controller = msg.controller
        self.ctx = ctx = self.PERSONALITY.make_context(
            msg.broker_config,
            msg.store_config,
            group=group.name,
            outbox=self.outbox,
            now_ms=now_ms(),
        )
        if msg.snapshot is not None:
            ctx.load_snapshot(msg.snapshot)
        if isinstance(ctx, HostedContext):
            ctx.runtime_dir = msg.runtime_dir  # e.g. the send core's HA wake pipes
            ctx.registration_barrier = True  # the controller releases held replies
        self.core = group.build(ctx)
        core = self.core
        self.group_commit = core if isinstance(core, GroupCommitCore) else None
        self.fd_core = core if isinstance(core, FdWatchingCore) else None
        self.loss_core = core if isinstance(core, ConnectionLossCore) else None
        self.batch_end = core if isinstance(core, BatchEndCore) else None
        self.flushed = core if isinstance(core, FlushedCore) else None
        self.linked = core if isinstance(core, LinkedCore) else None
        self.links = LinkTable(group.name, self.outbox)
        self.SPIN_US = group.spin_us
        self.flush_every = max(1, group.reply_flush_every)
        if group.direct_replies:  # one shared socket per consumer connection
            self.outbox.direct = DirectReplies()
            raise_fd_limit(msg.broker_config.maxConnections + FD_RESERVE)
        max_wait = group.max_wait_ms(msg.broker_config)
        self.host = ProcessorHost(group.name, self.core, self.outbox, max_wait, group.shed_codes)
        self.host.on_apply = self._on_apply
        if msg.broker_config.aclEnable:
            self.host.set_access(PlainAccessValidator(msg.broker_config.acl_home,
                                                   msg.broker_config.aclPlainFile))
        if group.holds_requests:
            self.host.on_ledger = self._on_ledger
            if isinstance(core, ObservedHoldCore):
                core.hold_observer = LedgerHolds(self.outbox.conn_channel, self.ledgers)
        self._attach_stats(group.name, msg.store_config)
        self.token = msg.channel_token
        if self.token:
            self.gate = TokenGate(self.token, group.name)
        self.listener = listen_channel(msg.channel_addr)
        self.listen_fd = self.listener.fileno()
        self.set_watch_fds([self.listen_fd])
        log.info("processor group=%s ready (max wait %d ms)", group.name, max_wait)
        self._tick()

    def _attach_stats(self, group: str, store_config: StoreConfig) -> None:
        """Publish this executor's queue figures (send, pull, query) and, for pull, the store's
        get counters into the broker's stats page (GET_BROKER_RUNTIME_INFO reads them)."""
        root = store_config.storePathRootDir
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
        store = self.ctx.store if self.ctx is not None else None
        if group == "pull" and store is not None:  # every store publishes its stats
            store.stats_page = page

    def _on_ledger(self, ch: Channel, fd: int) -> None:
        """The RemotingServer's request ledger for channel `ch` (a LEDGER record)."""
        old = self.ledgers.pop(ch, None)
        if old is not None:
            old.close()
        self.ledgers[ch] = LedgerWriter(fd)

    def _on_apply(self, blob: bytes, t: int) -> None:
        """Replicated events from another processor, in channel order with requests (one that
        cannot be applied leaves the replica wrong: the exception ends the actor)."""
        assert self.ctx is not None  # channels are read once started
        for event in pickle.loads(blob):
            self.ctx.apply(event, t)

    def _rs_channel(self) -> Channel | None:
        """The newest live channel from a RemotingServer."""
        for ch in reversed(self.rs_chs):
            if not ch.closed:
                return ch
        return None

    # -- links (actors.runtime.links) ------------------------------------------------------------
    def _open_link(self, msg: ConnectLink) -> None:
        """Connect to a service (or the writer) the controller named; an older link to the same
        role is its dead predecessor's."""
        old = self.links.opened.get(msg.role)
        if old is not None:
            self._link_lost(old)
        try:
            link = self.links.open(msg.role, msg.channel_addr, msg.channel_token)
        except OSError as exc:  # it died meanwhile: its replacement's ConnectLink comes later
            log.warning("group=%s link to %s at %s failed: %s", self.group, msg.role,
                        msg.channel_addr, exc)  # fmt: skip
            return
        log.info("group=%s linked to %s", self.group, msg.role)
        self._update_watch()
        if self.linked is not None:
            self.linked.on_link(link, now_ms())
        self._after_batch()

    def _sort(self, ch: Channel, records: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """A new channel's first records say what it is: a RemotingServer's or a link (their
        hello, taken off)."""
        self.unsorted.discard(ch.fd)
        hello = hello_of(records)
        if hello is None:
            return records
        if hello.role == REMOTING_HELLO:
            self.rs_chs.append(ch)
            self.outbox.default = ch  # the newest RemotingServer's
            self.schedule("tick", 0.0)  # what the core could not answer without one goes now
        else:
            for old in [lk for lk in self.links.by_fd.values() if lk.peer == hello.role
                        and lk.ch is not ch and lk.ch.fd in self.channels]:  # fmt: skip
                # a dead predecessor's: what it wrote before it died is handled first (e.g. a
                # schedule service's last deliveries, before its successor asks how far)
                got = old.ch.read_records()
                if got:
                    self._link_records(old, got)
                self._drop_channel(old.ch)
            link = self.links.accepted(ch, hello)
            log.info("group=%s linked from %s", self.group, hello.role)
            if self.linked is not None:
                self.linked.on_link(link, now_ms())
        return records[1:]

    def _link_records(self, link: ChannelLink, records: list[tuple[Any, ...]]) -> None:
        """What came on a link, in order: typed records and answers to the core, requests to
        the host (answered on the link)."""
        core, host, t = self.linked, self.host, now_ms()
        for i, rec in enumerate(records):
            rtype = rec[0]
            if rtype == REQUEST and host is not None:
                host.handle(link.ch, records[i : i + 1])
            elif rtype == LINK and core is not None:
                core.on_link_record(link, decode(rec[1]), t)  # a bad record ends the actor
            elif rtype == REPLY and core is not None:
                core.on_link_response(link, RemotingCommand.decode(rec[2][4:]), t)
            else:
                log.warning("group=%s unexpected record type %d on %r", self.group, rtype, link)

    def _link_lost(self, link: ChannelLink) -> None:
        self.links.drop(link)
        if link.ch.sock.fileno() >= 0:
            self.unwatch(link.ch.fd)
        link.ch.close()
        log.warning("group=%s %r lost", self.group, link)
        if self.linked is not None:
            self.linked.on_link_lost(link, now_ms())

    def _core_fds_changed(self) -> None:
        """Re-arm the watch only when the core's own descriptors changed (a rebuilt watch
        set rebuilds the epoll)."""
        fd_core = self.fd_core
        if fd_core is not None and set(fd_core.watch_fds()) != self._core_fds:
            self._update_watch()

    def _update_watch(self) -> None:
        fds = [self.listen_fd, *self.channels, *self.links.opened_fds()]
        if self.gate is not None:
            fds += self.gate.pending_fds()
        fd_core = self.fd_core  # e.g. a slave's HA connection
        self._core_fds = set(fd_core.watch_fds()) if fd_core is not None else set()
        fds += self._core_fds
        self.set_watch_fds(fds)

    def on_ready(self, fds: list[int]) -> None:
        host = self.host
        if host is None:
            return
        mine = [fd for fd in fds if fd in self._core_fds]
        if mine:
            fds = [fd for fd in fds if fd not in self._core_fds]
            try:
                assert self.fd_core is not None  # only its descriptors are in _core_fds
                self.fd_core.on_fd_ready(mine, now_ms())
            except Exception:
                log.exception("group=%s core fd handler failed", self.group)
            self._core_fds_changed()
        for fd in fds:
            if fd == self.listen_fd and self.listener is not None:
                if self.gate is not None:  # TCP: held until the token came (never waited for)
                    self.gate.accept(self.listener, time.monotonic())
                    self._expire_tokens()
                else:
                    for new_ch in accept_channels(self.listener, name=self.group):
                        self._add_channel(new_ch)
                self._update_watch()
                continue
            opened = self.links.get(fd)
            if opened is not None and fd not in self.channels:  # a link this actor opened
                got = opened.ch.read_records()
                if got is not None:
                    self._link_records(opened, got)
                if got is None or opened.ch.closed:
                    self._link_lost(opened)
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
            if fd in self.unsorted:
                records = self._sort(ch, records)
            link = self.links.get(fd)
            if link is not None:  # a link opened to this actor
                self._link_records(link, records)
                if ch.closed:
                    self._drop_channel(ch)
                continue
            step = self.flush_every
            for start in range(0, len(records), step):
                mark = len(ch.out)
                chunk = records[start : start + step]
                taken = host.handle(ch, chunk, len(records) - start - len(chunk))
                if taken:
                    ledger = self.ledgers.get(ch)  # after the record that brought it
                    if ledger is not None:
                        ledger.read += taken
                events = self.ctx.drain_events() if self.ctx is not None else None
                if events:  # ahead of this batch's replies: causal order for clients
                    ch.out[mark:mark] = events_record(self.group, events)
                    self.outbox.dirty.add(ch)
                self.outbox.release(direct_ok=not events)
                if start + step < len(records):
                    ch.flush()  # the client decodes these replies while we run the rest
            if ch.closed:
                self._drop_channel(ch)
        self._after_batch()

    def _add_channel(self, ch: Channel) -> None:
        if self.outbox.direct is not None or (self.host is not None and self.host.on_ledger):
            ch.take_fds()  # the RemotingServer passes client sockets, ledgers on Unix channels
        self.channels[ch.fd] = ch
        self.unsorted.add(ch.fd)

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
        """A channel closed (its RemotingServer died, or a link's peer died): the connections
        whose requests came on it are gone for this processor too, lost rather than closed to
        a ConnectionLossCore (their clients are likely reconnecting)."""
        link = self.links.get(ch.fd)
        if link is not None and link.ch is ch:
            self._link_lost(link)
        else:
            self.unwatch(ch.fd)
            ch.close()
        self.channels.pop(ch.fd, None)
        self.unsorted.discard(ch.fd)
        ledger = self.ledgers.pop(ch, None)
        if ledger is not None:
            ledger.close()
        if ch in self.rs_chs:
            self.rs_chs.remove(ch)
        if self.outbox.default is ch:
            self.outbox.default = self._rs_channel()
        gone = [c for c, via in self.outbox.conn_channel.items() if via is ch]
        t = now_ms()
        loss = self.loss_core
        for conn_id in gone:
            self.outbox.forget(conn_id)
            try:
                if loss is not None:
                    loss.on_connection_lost(conn_id, t)
                elif self.core is not None:
                    self.core.on_connection_closed(conn_id, t)
            except Exception:
                log.exception("group=%s on_connection_closed failed", self.group)
        self._update_watch()

    def _after_batch(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        gc = self.group_commit
        if gc is not None and gc.waiting:
            # SYNC_FLUSH group commit: one flush for the batch, then the replies (an exception
            # leaves them held: it ends the actor, and the store recovers in its replacement)
            gc.flush_and_release(now_ms())
            look = gc.next_look_ms(now_ms())  # parked: look again then
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
        if self.batch_end is not None:  # e.g. the send core's arrival notices
            self.batch_end.end_batch(now_ms())
        self._flush()
        if self.flushed is not None:  # e.g. the send core's HA wake-up
            self.flushed.after_flush(now_ms())

    def _flush(self) -> None:
        outbox = self.outbox
        outbox.release(direct_ok=True)  # from notices, timers, control: no reply waits on events
        if outbox.dirty:
            # links last, and only once the rest is out (actors.runtime.links.flush_order)
            others, links = self.links.flush_order(outbox.dirty)
            still = {ch for ch in others if not ch.flush()}
            still.update(links if still else (ch for ch in links if not ch.flush()))
            outbox.dirty = still
            if still:
                self.schedule("flush", FLUSH_RETRY_MS)
                return
        for ledger in self.ledgers.values():  # every answer so far has left this process
            ledger.publish()

    def _tick(self) -> None:
        delay = MAX_TICK_MS
        store = self.ctx.store if self.ctx is not None else None
        if store is not None:
            store.publish_stats()
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
        elif key == "tokens":
            self._expire_tokens()
        self._after_batch()

    def _shutdown_store(self) -> tuple[bool, str]:
        if self.store_closed:
            return True, "already closed"
        self.store_closed = True
        store = self.ctx.store if self.ctx is not None else None  # the send group's: the writer
        if store is None:
            return True, "no store"
        try:
            self._after_batch()
            if isinstance(self.core, StoreShutdownCore):  # e.g. the send core's delay offsets
                self.core.before_store_shutdown(now_ms())
            store.shutdown(now_ms())
        except Exception as exc:
            log.exception("group=%s store shutdown failed", self.group)
            return False, f"{type(exc).__name__}: {exc}"
        log.info("group=%s store shut down cleanly", self.group)
        return True, "ok"

    def on_exit(self) -> None:
        for link in list(self.links.opened.values()):  # answers the peer sent before it went
            got = link.ch.read_records()
            if got:
                self._link_records(link, got)
        if self.group == "send":
            self._shutdown_store()
        else:
            if isinstance(self.core, ClosingCore):  # e.g. the pull core's stats, last time
                try:
                    self.core.close()
                except Exception:
                    log.exception("group=%s core close failed", self.group)
            store = self.ctx.store if self.ctx is not None else None  # a MessageStoreReader
            if store is not None:
                try:
                    store.close()
                except Exception:
                    log.exception("group=%s store close failed", self.group)
        for ch in list(self.channels.values()):
            ch.close()
        direct = self.outbox.direct
        if direct is not None:
            log.info("group=%s answers written to clients: %d, through the RemotingServer: %d, "
                     "connections cut mid-frame: %d", self.group, direct.written,
                     direct.declined, direct.cut)  # fmt: skip
            direct.close_all()
        if self.gate is not None:
            self.gate.close()
        self.links.close()
        if self.listener is not None:
            addr = listen_address(self.listener)
            self.listener.close()
            if isinstance(addr, str):
                try:
                    os.unlink(addr)
                except OSError:
                    pass
