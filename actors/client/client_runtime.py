"""The user's process side of the client: one actor system, one I/O thread, one channel listener.

Mirrors what a Java application gets from MQClientManager + NettyRemotingClient's threads,
RocketMQ 4.9.x, here shared by every client of the process (docs/CLIENT.md §2):
- a multiprocTCPBase actor system for the client actors (MQClientInstanceActor, the consumer
  services), started by the first client, shut down when the last one closes (and at exit);
  its ports on 127.0.0.1, a free Admin Port, transientUnique, stdout/stderr pointed at
  /dev/null while the admin forks (so no actor holds the user's pipes), logs in the runtime
  directory (or ACTORMQ_CLIENT_LOG);
- the EventLoop thread (broker connections, channels) and the CallbackExecutor thread;
- the RemotingClient the process's producers send through (sync callers read their own
  responses: remoting_client.py);
- the Unix socket listener (mode 0600, in a 0700 directory) client actors connect to;
- the cyclic garbage collector's first threshold raised while clients run (GcThreshold).

The actor system starts before the threads (its admin is forked from this process: a fork
while our threads hold locks would copy them locked).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, Final, Protocol

from actors.client import client_channel as ch
from actors.client.errors import ClientClosedError, ClientErrorCode, MQClientError
from actors.client.event_loop import EPOLLIN, EPOLLOUT, CallbackExecutor, EventLoop
from actors.client.messages import ClientInstanceStarted
from actors.client.remoting_client import RemotingClient
from actors.runtime import loopback
from actors.runtime.tls import TlsConfig

log = logging.getLogger(__name__)

LOG_ENV: Final = "ACTORMQ_CLIENT_LOG"
GC_ENV: Final = "ACTORMQ_CLIENT_GC"  # "keep": leave the collector's thresholds alone
GC_GEN0_THRESHOLD: Final = 10_000
START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 10.0


class ChannelHandler(Protocol):
    """Serves one channel key in the user's process (calls arrive on the I/O thread)."""

    def on_open(self, end: ch.ChannelEnd) -> None:
        """The actor connected (its HELLO arrived)."""

    def on_records(self, end: ch.ChannelEnd, records: list[ch.Record]) -> None:
        """Records the actor sent (payload views are valid during the call only)."""

    def on_closed(self, end: ch.ChannelEnd) -> None:
        """The actor's end closed."""


@contextlib.contextmanager
def _quiet_stdio() -> Iterator[None]:
    """fds 1 and 2 on /dev/null meanwhile (what is forked now inherits no pipe of the user's)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # a daemon without fds 1 / 2: nothing to keep from the children
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def _log_defs(path: str) -> dict[str, Any]:
    return {
        "version": 1,
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": path,
                              "formatter": "plain", "level": "INFO"}},
        "root": {"handlers": ["file"], "level": "INFO"},
        "disable_existing_loggers": False,
    }


class GcThreshold:
    """The cyclic collector's first threshold, raised while the process runs clients.

    A consumer keeps thousands of messages in its process queues for a while, each a few
    container objects, and makes and drops them at tens of thousands a second. With CPython's
    default (a young collection every 700 net allocations) those messages are traversed again
    and again, promoted, and set off full collections: measured here, 14 % of a PushConsumer's
    time went to the collector (0.82 s in 6 s: 882 young, 80 middle and 8 full collections);
    at 10,000 the net allocations of a steady stream never reached it. Raised only, never
    lowered; put back when the last client closes unless someone changed it meanwhile;
    ACTORMQ_CLIENT_GC=keep leaves it alone. Cyclic garbage is collected as before, just in
    larger steps.
    """

    def __init__(self) -> None:
        self.before: tuple[int, int, int] | None = None

    def raise_(self) -> None:
        """Raise the first threshold (once; not when told to keep it or it is off or higher)."""
        if self.before is not None or os.environ.get(GC_ENV, "").lower() == "keep":
            return
        before = gc.get_threshold()
        if before[0] == 0 or before[0] >= GC_GEN0_THRESHOLD:  # 0: automatic collection off
            return
        gc.set_threshold(GC_GEN0_THRESHOLD, before[1], before[2])
        self.before = before
        log.info("gc threshold %s -> %d for the clients (%s=keep leaves it)", before,
                 GC_GEN0_THRESHOLD, GC_ENV)  # fmt: skip

    def restore(self) -> None:
        """Put the threshold back, if it is still the one set here."""
        before, self.before = self.before, None
        if before is not None and gc.get_threshold()[0] == GC_GEN0_THRESHOLD:
            gc.set_threshold(*before)


class ClientRuntime:
    """The process-wide client machinery; get() starts it, release() of the last user stops it."""

    _instance: ClientRuntime | None = None
    _guard = threading.Lock()

    @classmethod
    def get(cls) -> ClientRuntime:
        """The running runtime (started on first use); the caller must release() it."""
        with cls._guard:
            rt = cls._instance
            if rt is None or rt.closed or rt.pid != os.getpid():
                rt = cls._instance = cls()
            rt.users += 1
            return rt

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.users = 0
        self.closed = False
        self.dir = tempfile.mkdtemp(prefix=ch.RUNTIME_DIR_PREFIX)
        os.chmod(self.dir, 0o700)
        self.log_path = os.environ.get(LOG_ENV) or os.path.join(self.dir, "client.log")
        self._asys_lock = threading.RLock()
        self._handlers: dict[str, ChannelHandler] = {}
        self._ends: dict[int, ch.ChannelEnd] = {}
        self._pgids: set[int] = set()
        self.gc = GcThreshold()
        self.gc.raise_()  # before the fork: the client actors run with it too
        try:
            self.asys = self._start_actor_system()
        except BaseException:
            self.gc.restore()
            raise
        try:
            self.loop = EventLoop()
            self.callbacks = CallbackExecutor()
            self.remoting = RemotingClient(loop=self.loop)
            # one more per TLS setting a client of this process uses (remoting_for)
            self._tls_remotings: dict[TlsConfig, RemotingClient] = {}
            self.channel_path = os.path.join(self.dir, "c.sock")
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(self.channel_path)
            os.chmod(self.channel_path, 0o600)
            self._listener.listen(64)
            self._listener.setblocking(False)
            self.loop.register(self._listener.fileno(), EPOLLIN, self._on_accept)
        except BaseException:
            self._shutdown_actor_system()
            self.gc.restore()
            raise
        log.info("client runtime up (actor system admin port %d, dir %s)", self.admin_port,
                 self.dir)

    # -- the actor system -----------------------------------------------------------------------
    def _start_actor_system(self) -> Any:
        loopback.prepare_environment(loopback.LOOPBACK, os.path.join(self.dir, "thespian.log"))
        loopback.patch_thespian_transport(loopback.LOOPBACK)
        self.admin_port = loopback.stable_free_port()
        with _quiet_stdio():
            return loopback.start_actor_system(self.admin_port, _log_defs(self.log_path))

    def create_actor(self, cls: type, start_msg: Any, expect: tuple[type, ...],
                     timeout_s: float = START_TIMEOUT_S) -> tuple[Any, Any]:
        """Create an actor, tell it start_msg, wait for a reply of one of `expect`."""
        with self._asys_lock:
            if self.closed:
                raise ClientClosedError("client runtime")
            addr = self.asys.createActor(cls)
            self.asys.tell(addr, start_msg)
            deadline = time.monotonic() + timeout_s
            while (left := deadline - time.monotonic()) > 0:
                reply = self.asys.listen(timedelta(seconds=left))
                if reply is None:
                    break
                if isinstance(reply, expect):
                    if isinstance(reply, ClientInstanceStarted) and reply.pgid:
                        self._pgids.add(reply.pgid)
                    return addr, reply
                log.debug("runtime ignored %r while starting %s", reply, cls.__name__)
            self.asys.tell(addr, loopback.exit_request())
            raise MQClientError(ClientErrorCode.CLIENT_CLOSED,
                                f"{cls.__name__} did not start within {timeout_s:.0f} s")

    def ask(self, addr: Any, msg: Any, expect: tuple[type, ...],
            match: Callable[[Any], bool] | None = None,
            timeout_s: float = START_TIMEOUT_S) -> Any:  # fmt: skip
        """Tell msg, then listen for a reply of one of `expect` (and `match`, when given);
        other replies are dropped. None on timeout."""
        with self._asys_lock:
            if self.closed:
                raise ClientClosedError("client runtime")
            self.asys.tell(addr, msg)
            deadline = time.monotonic() + timeout_s
            while (left := deadline - time.monotonic()) > 0:
                reply = self.asys.listen(timedelta(seconds=left))
                if reply is None:
                    return None
                if isinstance(reply, expect) and (match is None or match(reply)):
                    return reply
                log.debug("runtime ignored %r while waiting for %s", reply, expect)
            return None

    def tell(self, addr: Any, msg: Any) -> None:
        """A Thespian message to an actor of this system (control only)."""
        with self._asys_lock:
            if not self.closed:
                self.asys.tell(addr, msg)

    def stop_actor(self, addr: Any) -> None:
        """Ask an actor to exit."""
        self.tell(addr, loopback.exit_request())

    # -- channels -------------------------------------------------------------------------------
    def remoting_for(self, tls: TlsConfig | None) -> RemotingClient:
        """The process's remoting client for these TLS settings (None: the plain one); the
        connections of clients with other settings are never shared with it."""
        if tls is None or not tls.enable:
            return self.remoting
        with self._asys_lock:
            remoting = self._tls_remotings.get(tls)
            if remoting is None:
                remoting = self._tls_remotings[tls] = RemotingClient(loop=self.loop, tls=tls)
            return remoting

    def add_channel_handler(self, key: str, handler: ChannelHandler) -> None:
        """Serve the channel an actor opens with HELLO(key); register before starting it."""
        self._handlers[key] = handler

    def remove_channel_handler(self, key: str) -> None:
        """Stop serving key (its channel is closed when the actor's end closes)."""
        self._handlers.pop(key, None)

    def _on_accept(self, _ev: int) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if not self.closed:
                    log.warning("channel accept failed: %s", exc)
                return
            end = ch.ChannelEnd(sock)
            end.take_fds()  # from the first read: a pull actor hands over its rings' memfds
            end.on_pending_out = self._want_write
            self._ends[end.fd] = end
            self.loop.register(end.fd, EPOLLIN, functools.partial(self._on_channel, end))

    def _want_write(self, end: ch.ChannelEnd) -> None:
        self.loop.modify(end.fd, EPOLLIN | EPOLLOUT)

    def _on_channel(self, end: ch.ChannelEnd, ev: int) -> None:
        if ev & EPOLLOUT and end.flush():
            self.loop.modify(end.fd, EPOLLIN)
        if not ev & ~EPOLLOUT:
            return
        records = end.read_records()
        if records and not end.key:
            kind, payload = records[0]
            try:
                hello = ch.read_record(kind, payload)
            except ch.ChannelError as exc:
                hello = None
                log.error("channel's first record is bad: %s", exc)
            if not isinstance(hello, ch.Hello):
                log.error("channel without HELLO (kind %d): closing", kind)
                records = None
            else:
                end.key = hello.key
                records = records[1:]
                handler = self._handlers.get(end.key)
                if handler is None:
                    log.error("channel key %r has no handler: closing", end.key)
                    records = None
                else:
                    handler.on_open(end)
        if records:
            handler = self._handlers.get(end.key)
            if handler is not None:
                handler.on_records(end, records)
        if records is None or end.closed:
            self.loop.unregister(end.fd)
            self._ends.pop(end.fd, None)
            end.close()
            handler = self._handlers.get(end.key)
            if handler is not None:
                handler.on_closed(end)

    # -- shutdown -------------------------------------------------------------------------------
    def release(self) -> None:
        """One user less; the last one shuts everything down."""
        with ClientRuntime._guard:
            self.users -= 1
            if self.users > 0 or self.closed:
                return
            if ClientRuntime._instance is self:
                ClientRuntime._instance = None
        self.shutdown()

    def shutdown(self) -> None:
        """Stop the actor system (bounded; SIGKILL by PID after), the threads, the listener."""
        if self.closed:
            return
        for end in list(self._ends.values()):
            end.send_record(ch.Bye())  # a clean close: the actors do not take it as orphaning
        self._shutdown_actor_system()
        self.loop.stop()
        self._close_channels()
        self.remoting.close()
        for remoting in self._tls_remotings.values():
            remoting.close()
        self.callbacks.stop()
        try:
            self._listener.close()
        except OSError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
        self.gc.restore()
        log.info("client runtime stopped")

    def _close_channels(self) -> None:
        for end in list(self._ends.values()):
            self.loop.unregister(end.fd)
            end.close()
        self._ends.clear()

    def _shutdown_actor_system(self) -> None:
        with self._asys_lock:
            if self.closed:
                return
            self.closed = True
            pids = self._system_pids()
            try:
                self.asys.shutdown()
            except Exception:
                log.exception("actor system shutdown failed")
        left = _wait_gone(pids, STOP_TIMEOUT_S)
        for pid in left:
            log.warning("client actor process %d did not exit: killing it", pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _wait_gone(left, 2.0)

    def _system_pids(self) -> list[int]:
        """Every process of the actor system (the process groups the actors reported)."""
        pids = []
        for pgid in self._pgids:
            pids += _pids_in_group(pgid)
        return sorted(set(pids) - {os.getpid()})

    @classmethod
    def _at_exit(cls) -> None:
        """Interpreter exit: stop the runtime of clients never closed."""
        rt = cls._instance
        if rt is not None and not rt.closed and rt.pid == os.getpid():
            rt.shutdown()


atexit.register(ClientRuntime._at_exit)


def _pids_in_group(pgid: int) -> list[int]:
    out: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            if os.getpgid(int(name)) == pgid:
                out.append(int(name))
        except OSError:
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    alive = [p for p in pids if _alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    return alive
