"""Master-slave replication over RocketMQ's HA stream: the master's HAService as an actor, and
the slave's HAClient that the slave's store writer (its send actor) runs.

Mirrors store/ha/HAService.java (AcceptSocketService, GroupTransferService's view of slave
acks), HAConnection.java (ReadSocketService, WriteSocketService) and HAService.HAClient,
RocketMQ 4.9.x (spec §10; units in store.ha):

- Master: an actor in its own process listens on the HA port, maps the store read-only, and
  per slave streams the commit log from where the slave's first report says (an empty slave:
  the master's last file), in frames of at most haTransferBatchSize within one file, a
  header-only heartbeat after haSendHeartbeatInterval of nothing new; it drops a slave silent
  for haHousekeepingInterval. The largest offset any slave reported and the number of slaves
  go to the shared state page (the send actor's isSlaveOK reads them), and the offset to the
  GroupTransferService actor (actors.broker.group_transfer) as SlaveAcked on their link
  (notifyTransferSome): it answers the SYNC_MASTER sends the offset covers.
- Slave: HAClient connects to the master's HA address (haMasterAddress, or the haServerAddr
  the name server returned at registration), reports its commit-log end at once, every
  haSendHeartbeatInterval and after every append, and appends what comes to its store
  (DefaultMessageStore.append_to_commit_log, whose reput builds the consume queues).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import time
from typing import Any, Final

from actors.runtime.channel import Channel, listen_channel, recv_available, send_out
from actors.runtime.client_conn import start_connect
from actors.runtime.link_records import SlaveAcked
from actors.runtime.links import ChannelLink, LinkTable
from actors.runtime.messages import ConnectLink, HAFailed, HAReady, StartHA
from actors.runtime.wake import HA_TRANSFER, WakeReader
from actors.runtime.watch import WatchingActor
from store.ha import (
    HEADER,
    REPORT,
    HAStreamError,
    ReportDecoder,
    TransferDecoder,
    master_start_offset,
)
from store.state_page import OFF_HA_ACKED, OFF_HA_SLAVES, StatePage

log = logging.getLogger(__name__)

BUSY_PUMP_MS: Final = 1.0  # transfer pass while slaves are being fed
# while they are caught up, new data waits at most this long: short for a SYNC_MASTER (its
# sends wait on the slave), Java's 100 ms for an ASYNC_MASTER
SYNC_IDLE_PUMP_MS: Final = 5.0
ASYNC_IDLE_PUMP_MS: Final = 100.0
READ_CHUNK: Final = 256 * 1024
PUMP_BUDGET: Final = 4 * 1024 * 1024  # bytes per slave per pass (control messages wait meanwhile)
CONNECT_TIMEOUT_MS: Final = 3000
RECONNECT_MS: Final = 5000  # after a connect that failed (HAClient waits 5 s)
REDIAL_MS: Final = 1000  # after an established connection dropped (its next 1 s loop)


class _SlaveConn:
    """One slave on the master: its reports in, the commit log out."""

    def __init__(self, sock: socket.socket, peer: Any, now: float) -> None:
        self.sock = sock
        self.peer = peer
        self.reports = ReportDecoder()
        self.acked = -1  # last report (-1: none yet)
        self.next = -1  # next commit-log offset to send (-1: waiting for the first report)
        self.out = bytearray()
        self.last_read = now
        self.last_write = now

    def flush(self) -> bool:
        """Write what the kernel takes; False when something is still pending."""
        empty, err = send_out(self.sock, self.out)
        if err is not None:
            raise err
        return empty

    def send_frame(self, header: bytes, body: Any) -> bool:
        """Write a frame straight from the mapped commit log (sendmsg of header and body, no
        copy); only what the kernel did not take is kept; False when some is kept."""
        if self.out:
            self.out += header
            self.out += body
            return self.flush()
        try:
            n = self.sock.sendmsg([header, body])
        except (BlockingIOError, InterruptedError):
            n = 0
        total = len(header) + len(body)
        if n >= total:
            return True
        if n < len(header):
            self.out += header[n:]
            self.out += body
        else:
            self.out += body[n - len(header) :]
        return False


class HAServiceActor(WatchingActor):
    """The master's HA service: accepts slaves and feeds them the commit log."""

    LINGER_IDLE_MS = 5.0
    LINGER_CAP_MS = 50.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listener: socket.socket | None = None
        self.conns: dict[int, _SlaveConn] = {}
        self.reader: Any = None
        self.state: Any = None
        self.file_size = 0
        self.cfg: StartHA | None = None
        # SYNC_MASTER: the send actor pokes when a send waits for a slave (actors.runtime.wake)
        self.transfer_wake: WakeReader | None = None
        self.dirty: set[Channel] = set()  # the link's channel while it has bytes to write
        self.links = LinkTable("HAService", self)
        self.transfer: ChannelLink | None = None  # to the GroupTransferService (SYNC_MASTER)

    # -- control --------------------------------------------------------------------------------
    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartHA):
            try:
                port = self._start(msg)
            except Exception as exc:
                log.exception("HA service failed to start")
                self._close_all()
                self.send(sender, HAFailed(f"{type(exc).__name__}: {exc}"))
                return
            self.send(sender, HAReady(port))
        elif isinstance(msg, ConnectLink):
            self._link(msg)

    def _link(self, msg: ConnectLink) -> None:
        """Report push2SlaveMaxOffset to the GroupTransferService (its first report: now)."""
        if self.transfer is not None:
            self.links.drop(self.transfer)
            self.transfer.ch.close()
        try:
            self.transfer = self.links.open(msg.role, msg.channel_addr, msg.channel_token)
        except OSError as exc:  # it died meanwhile: its replacement's ConnectLink comes later
            log.warning("HA link to %s failed: %s", msg.role, exc)
            self.transfer = None
            return
        self._report_acked()

    def _start(self, msg: StartHA) -> int:
        from store.message_store_reader import MessageStoreReader

        self.cfg = msg
        sc = msg.store_config
        self.file_size = int(sc.mappedFileSizeCommitLog)
        self.reader = MessageStoreReader(sc)
        self.state = StatePage(os.path.join(sc.storePathRootDir, "state"), writable=True)
        self.state.set(OFF_HA_SLAVES, 0)
        self.state.set(OFF_HA_ACKED, 0)
        if msg.sync_master and msg.runtime_dir:
            self.transfer_wake = WakeReader(os.path.join(msg.runtime_dir, HA_TRANSFER))
        try:
            lst = listen_channel((msg.host, msg.port))
        except OSError as exc:
            if not msg.free_port_fallback or exc.errno != errno.EADDRINUSE:
                raise
            lst = listen_channel((msg.host, 0))  # derived and taken: any free port (advertised)
        self.listener = lst
        self._watch()
        port = int(lst.getsockname()[1])
        log.info("HA service listening on %s:%d", msg.host, port)
        return port

    def on_exit(self) -> None:
        self._close_all()

    def _close_all(self) -> None:
        for c in list(self.conns.values()):
            self._drop(c, "shutdown")
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self.transfer_wake is not None:
            self.transfer_wake.close()
        self.transfer_wake = None
        self.links.close()
        self.transfer = None
        self.set_watch_fds([])

    def _watch(self) -> None:
        fds = [c.sock.fileno() for c in self.conns.values()]
        if self.listener is not None:
            fds.append(self.listener.fileno())
        if self.transfer_wake is not None:
            fds += self.transfer_wake.fds()
        self.set_watch_fds(fds)

    # -- sockets --------------------------------------------------------------------------------
    def on_ready(self, fds: list[int]) -> None:
        now = time.monotonic()
        lst = self.listener
        wake = self.transfer_wake
        for fd in fds:
            if lst is not None and fd == lst.fileno():
                self._accept(now)
                continue
            if wake is not None and fd == wake.fd:
                wake.drain()  # a send waits for a slave: the pump below feeds the slaves now
                continue
            c = self.conns.get(fd)
            if c is not None:
                self._read(c, now)
        self._pump()

    def _accept(self, now: float) -> None:
        assert self.listener is not None
        while True:
            try:
                sock, peer = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                log.warning("HA accept failed: %s", exc)
                break
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.conns[sock.fileno()] = _SlaveConn(sock, peer, now)
            log.info("HA slave connected from %s:%d", peer[0], peer[1])
        self._watch()
        self._publish()
        self.schedule("pump", BUSY_PUMP_MS)

    def _read(self, c: _SlaveConn, now: float) -> None:
        """ReadSocketService: the last complete report wins."""
        data, eof, err = recv_available(c.sock, READ_CHUNK)
        if eof:
            self._drop(c, str(err) if err is not None else "closed by the slave")
            return
        if not data:
            return
        c.last_read = now
        try:
            report = c.reports.feed(data)
        except HAStreamError as exc:
            self._drop(c, str(exc))
            return
        if report is None:
            return
        if report > self.reader.max_phy_offset:  # 4.9.1+: a slave ahead of us is refused
            # its first report too (Java checks only later ones): believed, its offset became
            # push2SlaveMaxOffset and SYNC_MASTER answered SEND_OK for sends no slave had
            self._drop(c, f"reported {report}, beyond this master's {self.reader.max_phy_offset}")
            return
        if c.next < 0:  # the first report says where to start
            c.next = master_start_offset(report, self.reader.max_phy_offset, self.file_size)
            log.info("HA slave %s:%d reported %d: transfer from %d", c.peer[0], c.peer[1],
                     report, c.next)  # fmt: skip
        c.acked = report
        self._publish()

    def _drop(self, c: _SlaveConn, why: str) -> None:
        log.info("HA slave %s:%d dropped: %s", c.peer[0], c.peer[1], why)
        self.conns.pop(c.sock.fileno(), None)
        try:
            c.sock.close()
        except OSError:
            pass
        self._watch()
        self._publish()

    def _publish(self) -> None:
        """push2SlaveMaxOffset and the slave count, for the send actor's SYNC_MASTER waits."""
        if self.state is None:
            return
        self.state.set(OFF_HA_SLAVES, len(self.conns))  # connectionCount: from the accept on
        acked = [c.acked for c in self.conns.values() if c.acked >= 0]
        if acked and max(acked) > self.state.get(OFF_HA_ACKED):  # it only grows
            self.state.set(OFF_HA_ACKED, max(acked))
            self._report_acked()  # notifyTransferSome

    def _report_acked(self) -> None:
        """SlaveAcked to the GroupTransferService, written at once (a closed link is dropped:
        the controller links the replacement)."""
        link = self.transfer
        if link is None or self.state is None:
            return
        link.send(SlaveAcked(self.state.get(OFF_HA_ACKED), len(self.conns)))
        link.ch.flush()
        self.dirty.discard(link.ch)
        if link.ch.out:
            self.dirty.add(link.ch)
            self.schedule("pump", BUSY_PUMP_MS)  # the pump writes the rest
        if link.ch.closed:
            log.warning("HA link to the group transfer service closed")
            self.links.drop(link)
            self.transfer = None

    # -- transfer -------------------------------------------------------------------------------
    def on_timer(self, key: str) -> None:
        if key == "pump":
            self._pump()

    def _pump(self) -> None:
        """WriteSocketService for every slave; re-arms while any slave is connected."""
        cfg = self.cfg
        if cfg is None or self.reader is None:
            return
        for ch in list(self.dirty):  # what the link to the transfer service did not take
            if ch.flush() or ch.closed:
                self.dirty.discard(ch)
        now = time.monotonic()
        busy = False
        for c in list(self.conns.values()):
            if now - c.last_read > cfg.store_config.haHousekeepingInterval / 1000.0:
                self._drop(c, f"nothing read for {cfg.store_config.haHousekeepingInterval} ms")
                continue
            try:
                busy = self._feed(c, cfg, now) or busy
            except OSError as exc:
                self._drop(c, str(exc))
        if self.conns:
            # a SYNC_MASTER without the transfer pipe polls for what its sends wait on
            woken = self.transfer_wake is not None and bool(self.transfer_wake.fds())
            idle = SYNC_IDLE_PUMP_MS if cfg.sync_master and not woken else ASYNC_IDLE_PUMP_MS
            self.schedule("pump", BUSY_PUMP_MS if busy else idle)

    def _feed(self, c: _SlaveConn, cfg: StartHA, now: float) -> bool:
        """One slave's turn: what is pending, then new frames until the socket is full (or the
        pass's budget is spent), else a heartbeat when due; True when more is likely waiting."""
        if not c.flush():
            return True  # still writing: come back soon
        if c.next < 0:
            return False
        fed = False
        budget = PUMP_BUDGET  # WriteSocketService writes until the socket is full
        while budget > 0:
            data = self.reader.get_commit_log_data(c.next, cfg.store_config.haTransferBatchSize)
            if data is None or not len(data):
                break
            header = HEADER.pack(c.next, len(data))
            c.next += len(data)
            c.last_write = now
            fed = True
            budget -= len(data)
            if not c.send_frame(header, data):
                break  # the socket is full: the rest goes next pass
        if not fed and now - c.last_write >= cfg.store_config.haSendHeartbeatInterval / 1000.0:
            c.send_frame(HEADER.pack(c.next, 0), b"")  # heartbeat: nothing new
            c.last_write = now
        return fed


class HAClient:
    """The slave's end: runs inside the slave's store writer (its send actor)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.heartbeat_ms = int(store.cfg.haSendHeartbeatInterval)
        self.housekeeping_ms = int(store.cfg.haHousekeepingInterval)
        self.master: str = ""  # "host:port" of the master's HA service
        self.sock: socket.socket | None = None
        self.decoder = TransferDecoder()
        self.last_report_ms = 0
        self.last_read_ms = 0
        self.next_connect_ms = 0
        self.connecting = False  # a non-blocking connect is under way
        self.connect_deadline_ms = 0
        self.appended = 0  # bytes appended since start (diagnostics)

    def set_master(self, addr: str, now_ms: int) -> None:
        """The master's HA address changed (or was learned): reconnect to it."""
        if addr == self.master:
            return
        log.info("HA master address %s -> %s", self.master or "(none)", addr or "(none)")
        self.close()
        self.master = addr
        self.next_connect_ms = now_ms

    def fds(self) -> list[int]:
        """The descriptor to watch (none while disconnected)."""
        return [self.sock.fileno()] if self.sock is not None else []

    def close(self) -> None:
        """Drop the connection (reconnect after RECONNECT_MS)."""
        self.connecting = False
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        self.decoder = TransferDecoder()

    def tick(self, now_ms: int) -> int:
        """Connect when due, report when due, give up on a silent master; ms to the next."""
        if not self.master:
            return 1000
        if self.sock is None:
            if now_ms < self.next_connect_ms:
                return self.next_connect_ms - now_ms
            self._connect(now_ms)
            if self.sock is None:
                return RECONNECT_MS
        if self.connecting:
            return self._connected(now_ms)
        if now_ms - self.last_read_ms > self.housekeeping_ms:
            log.warning("HA master %s silent for %d ms: reconnecting", self.master,
                        self.housekeeping_ms)  # fmt: skip
            self._fail(now_ms, dropped=True)
            return REDIAL_MS
        if now_ms - self.last_report_ms >= self.heartbeat_ms:
            self._report(now_ms)
        return max(1, self.heartbeat_ms - (now_ms - self.last_report_ms))

    def _connect(self, now_ms: int) -> None:
        """Start a non-blocking connect (the writer's thread never waits on the network)."""
        host, _, port = self.master.rpartition(":")
        try:
            sock, err = start_connect((host, int(port)))
        except (OSError, ValueError, OverflowError) as exc:
            log.warning("HA master address %s unusable: %s", self.master, exc)
            self.next_connect_ms = now_ms + RECONNECT_MS
            return
        if err:
            log.warning("HA master %s unreachable: %s", self.master, os.strerror(err))
            sock.close()
            self.next_connect_ms = now_ms + RECONNECT_MS
            return
        self.sock = sock
        self.connecting = True
        self.connect_deadline_ms = now_ms + CONNECT_TIMEOUT_MS
        self.last_read_ms = now_ms
        self._connected(now_ms)

    def _connected(self, now_ms: int) -> int:
        """Finish a pending connect when the socket is writable: report at once (connectMaster);
        ms until the next look."""
        sock = self.sock
        assert sock is not None
        _r, writable, _x = select.select([], [sock], [], 0)
        if not writable:
            if now_ms >= self.connect_deadline_ms:
                log.warning("HA master %s: connect timed out", self.master)
                self._fail(now_ms)
                return RECONNECT_MS
            return 5
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            log.warning("HA master %s unreachable: %s", self.master, os.strerror(err))
            self._fail(now_ms)
            return RECONNECT_MS
        self.connecting = False
        self.last_read_ms = now_ms
        log.info("HA connected to master %s, reporting %d", self.master,
                 self.store.commitlog.max_offset)  # fmt: skip
        self._report(now_ms)
        return self.heartbeat_ms

    def _fail(self, now_ms: int, dropped: bool = False) -> None:
        """Close; connect again after RECONNECT_MS, or REDIAL_MS when a working connection
        dropped (closeMaster, then the next loop connects: a SYNC_MASTER's sends are answered
        SLAVE_NOT_AVAILABLE until then)."""
        self.close()
        self.next_connect_ms = now_ms + (REDIAL_MS if dropped else RECONNECT_MS)

    def _report(self, now_ms: int) -> None:
        """The slave's commit-log end, the next byte it needs."""
        if self.sock is None:
            return
        try:
            n = self.sock.send(REPORT.pack(self.store.commitlog.max_offset))
        except (BlockingIOError, InterruptedError):
            return  # the socket is full: the next report goes later
        except OSError as exc:
            log.warning("HA report to %s failed: %s", self.master, exc)
            self._fail(now_ms, dropped=True)
            return
        if n != REPORT.size:  # a torn report would shift every later one: start over
            log.warning("HA report to %s written in part (%d bytes): reconnecting", self.master, n)
            self._fail(now_ms, dropped=True)
            return
        self.last_report_ms = now_ms

    def on_ready(self, now_ms: int) -> None:
        """Read what the master sent, append it, report the new end."""
        sock = self.sock
        if sock is None:
            return
        if self.connecting:  # readable while connecting: a refused connect (or data)
            self._connected(now_ms)
            if self.sock is None or self.connecting:
                return
        data, eof, err = recv_available(sock, READ_CHUNK)
        if err is not None and err.errno not in (errno.ECONNRESET, errno.EPIPE):
            log.warning("HA read from %s failed: %s", self.master, err)
        if data:
            self.last_read_ms = now_ms
            if not self._apply(data, now_ms):
                self._fail(now_ms, dropped=True)
                return
        if eof:
            log.info("HA master %s closed the connection", self.master)
            self._fail(now_ms, dropped=True)

    def _apply(self, data: bytes, now_ms: int) -> bool:
        """dispatchReadRequest: check each frame's offset against ours, append, report."""
        try:
            frames = self.decoder.feed(data)
        except HAStreamError as exc:
            log.error("HA stream from %s: %s", self.master, exc)
            return False
        appended = False
        store = self.store
        for phy, body in frames:
            ours = store.commitlog.max_offset
            if ours != 0 and ours != phy:
                log.error("HA master %s sent offset %d, this slave is at %d: reconnecting",
                          self.master, phy, ours)  # fmt: skip
                return False
            if body:
                if not store.append_to_commit_log(phy, body, now_ms):
                    log.error("HA append of %d bytes at %d failed (does mappedFileSizeCommitLog "
                              "%d match the master's?)", len(body), phy,
                              store.cfg.mappedFileSizeCommitLog)  # fmt: skip
                    return False
                self.appended += len(body)
                appended = True
        if appended:
            self._report(now_ms)
        return True
