"""ProcessorActor: one processor group (send, pull, admin, ...) in its own process.

Mirrors the executor side of remoting/netty/NettyRemotingAbstract.java (processRequestCommand
on a processor's own executor) and BrokerController.registerProcessor, RocketMQ 4.9.x.
Requests reach a ProcessorActor over its direct channel (actors.runtime.channel), never as
Thespian messages; Thespian carries only startup, replicated-state events, and shutdown.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import time
from typing import Any, ClassVar

from actors.broker.notify_message_arriving_listener import (
    HOLDS_OFF_DELAY_MS,
    ArrivalNoticeGate,
    HoldsReporter,
)
from actors.broker.personality import BROKER, BrokerPersonality, HostedContext, ProcessorContext
from actors.core import (
    ArrivalCore,
    BarrierCore,
    ClosingCore,
    ConnectionLossCore,
    FdWatchingCore,
    GroupCommitCore,
    HeldPullTable,
    HoldingCore,
    ProcessorCore,
    Request,
    StoreShutdownCore,
)
from actors.runtime.channel import (
    HOLDS,
    Channel,
    accept_channels,
    add_holds,
    add_notices,
    connect_channel,
    events_record,
    listen_address,
    listen_channel,
)
from actors.runtime.direct_reply import DirectReplies
from actors.runtime.messages import (
    BrokerEventBatch,
    ConnectNotices,
    ProcessorReady,
    ProcessorStartFailed,
    ReleaseBarrier,
    ShutdownStore,
    StartProcessor,
    StoreShutdownDone,
)
from actors.runtime.processor_host import ChannelOutbox, ProcessorHost
from actors.runtime.request_ledger import LedgerWriter
from actors.runtime.tcp import FD_RESERVE, raise_fd_limit
from actors.runtime.token_gate import TokenGate
from actors.runtime.watch import WatchingActor, now_ms
from store.config import StoreConfig
from store.stats_page import OFF_LOCK_SINCE_MS, StatsPage, queue_offset, stats_path

log = logging.getLogger(__name__)
MAX_TICK_MS = 1000.0
SLOW_TICK_MS = 50.0
FLUSH_RETRY_MS = 1.0


class LedgerHolds:
    """HoldObserver: each held request goes into the request ledger of the channel it came
    on (actors.runtime.request_ledger), whose RemotingServer answers it if this process dies."""

    __slots__ = ("conn_channel", "writers")

    def __init__(self, conn_channel: dict[int, Channel], writers: dict[Channel, LedgerWriter]
                 ) -> None:  # fmt: skip
        self.conn_channel = conn_channel
        self.writers = writers

    def held(self, req: Request, offset: int) -> object:
        ch = self.conn_channel.get(req.conn_id)
        writer = self.writers.get(ch) if ch is not None else None
        if writer is None:
            return None
        cmd = req.cmd
        slot = writer.hold(req.conn_id, cmd.opaque, cmd.serialize_type, offset)
        return (writer, slot) if slot >= 0 else None

    def released(self, token: object) -> None:
        if isinstance(token, tuple):
            writer, slot = token
            writer.release_later(slot)


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
        self.arrival_core: ArrivalCore | None = None
        self.loss_core: ConnectionLossCore | None = None
        self.hold: HeldPullTable | None = None  # the pull core's held requests
        self.outbox = ChannelOutbox()
        self.listener: socket.socket | None = None
        self.token = b""  # TCP channels: what a connection must send first
        self.gate: TokenGate | None = None  # TCP channels waiting for their token
        self.listen_fd = -1
        self.channels: dict[int, Channel] = {}
        self.ledgers: dict[Channel, LedgerWriter] = {}  # a holding group's, per RS channel
        self.notice_ch: Channel | None = None  # send actor: to the pull actor
        self._core_fds: set[int] = set()  # descriptors the core asked to watch (watch_fds)
        self.gate_notices = ArrivalNoticeGate()  # send actor: notices to the pull actor
        self.holds = HoldsReporter()  # pull actor: HOLDS records to the send actor
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
        elif isinstance(msg, ConnectNotices):
            if self.notice_ch is not None:  # the pull actor was replaced: the old one is gone
                self.unwatch(self.notice_ch.fd)
                self.notice_ch.close()
            self.gate_notices.connected()  # until the new pull actor says otherwise
            self.notice_ch = connect_channel(
                msg.channel_addr, name="notices", token=msg.channel_token
            )
            add_notices(self.notice_ch.out, [])  # hello: the pull actor learns this channel
            self.outbox.dirty.add(self.notice_ch)
            self._update_watch()
            self._flush()
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
        self.arrival_core = core if isinstance(core, ArrivalCore) else None
        self.loss_core = core if isinstance(core, ConnectionLossCore) else None
        self.hold = core.hold if isinstance(core, HoldingCore) else None
        self.SPIN_US = group.spin_us
        self.flush_every = max(1, group.reply_flush_every)
        if group.direct_replies:  # one shared socket per consumer connection
            self.outbox.direct = DirectReplies()
            raise_fd_limit(msg.broker_config.maxConnections + FD_RESERVE)
        max_wait = group.max_wait_ms(msg.broker_config)
        self.host = ProcessorHost(group.name, self.core, self.outbox, max_wait, group.shed_codes)
        if self.arrival_core is not None:
            self.host.on_notices = self._on_notices
        self.host.on_apply = self._on_apply
        if group.holds_requests:
            self.host.on_ledger = self._on_ledger
            if self.hold is not None:
                self.hold.observer = LedgerHolds(self.outbox.conn_channel, self.ledgers)
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

    def _on_notices(self, notices: list[Any], t: int) -> None:
        if not notices:  # re-check request: every held queue against the store now
            notices = self._held_queue_notices()
            if not notices:
                return
        assert self.arrival_core is not None  # the host calls this only then
        woken = self.arrival_core.on_arrival(notices, t)
        if isinstance(woken, list):  # a core may return (conn_id, cmd) pairs, not use the outbox
            for conn_id, cmd in woken:
                self.outbox.send(conn_id, cmd)

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
        """A live channel to the RemotingServer (not the send actor's notice channel)."""
        notice_src = self.host.notice_channel if self.host is not None else None
        for ch in self.channels.values():
            if ch is not notice_src and not ch.closed:
                return ch
        return None

    def _core_fds_changed(self) -> None:
        """Re-arm the watch only when the core's own descriptors changed (a rebuilt watch
        set rebuilds the epoll)."""
        fd_core = self.fd_core
        if fd_core is not None and set(fd_core.watch_fds()) != self._core_fds:
            self._update_watch()

    def _update_watch(self) -> None:
        fds = [self.listen_fd, *self.channels]
        if self.gate is not None:
            fds += self.gate.pending_fds()
        if self.notice_ch is not None and not self.notice_ch.closed:
            fds.append(self.notice_ch.fd)
        fd_core = self.fd_core  # e.g. a slave's HA connection
        self._core_fds = set(fd_core.watch_fds()) if fd_core is not None else set()
        fds += self._core_fds
        self.set_watch_fds(fds)

    def _held_queue_notices(self) -> list[Any]:
        """(topic, qid, max offset, None, 0) for every queue with held pulls (pull actor)."""
        table = self.hold.table if self.hold is not None else None
        store = self.ctx.store if self.ctx is not None else None
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
        return True if self.hold is None else bool(self.hold.table)

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
                assert self.fd_core is not None  # only its descriptors are in _core_fds
                self.fd_core.on_fd_ready(mine, now_ms())
            except Exception:
                log.exception("group=%s core fd handler failed", self.group)
            self._core_fds_changed()
        for fd in fds:
            if self.notice_ch is not None and fd == self.notice_ch.fd:
                self._read_notice_channel(self.notice_ch)
                continue
            if fd == self.listen_fd and self.listener is not None:
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
            step = self.flush_every
            for start in range(0, len(records), step):
                mark = len(ch.out)
                chunk = records[start : start + step]
                taken = host.handle(ch, chunk, len(records) - start - len(chunk))
                if taken:
                    ledger = self.ledgers.get(ch)  # after the record that brought it
                    if ledger is not None:
                        ledger.read += taken
                events = None
                if ch is not host.notice_channel and self.ctx is not None:
                    events = self.ctx.drain_events()
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
        connections whose requests came on it are gone for this processor too, lost rather
        than closed to a ConnectionLossCore (their clients are likely reconnecting)."""
        self.unwatch(ch.fd)
        ch.close()
        self.channels.pop(ch.fd, None)
        ledger = self.ledgers.pop(ch, None)
        if ledger is not None:
            ledger.close()
        if self.outbox.default is ch:
            self.outbox.default = next(iter(self.channels.values()), None)
        if self.host is not None and self.host.notice_channel is ch:
            self.host.notice_channel = None
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
        outbox.release(direct_ok=True)  # from notices, timers, control: no reply waits on events
        if outbox.dirty:
            still = {ch for ch in outbox.dirty if not ch.flush()}
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
        elif key == "holds-off" and self.holds.quiet_delay_over(self._holding()):
            self._report_holding(False)
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
