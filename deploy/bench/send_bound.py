"""The ceiling of any broker design built on this send core: one process, no actors at all.

Mirrors nothing in RocketMQ. The server is one forked process that owns the client socket,
the store (ASYNC_FLUSH, index built by a spawned IndexService process as in the broker) and
the broker's own SendMessageProcessor, and serves SEND_MESSAGE_V2 in a blocking loop shaped
like the raw echo's: read, split frames, `fast_path` each (the general path for the first one,
which creates the topic), write every reply in one send. No selector, no channel, no second
process on the request path: whatever the RemotingServer / processor split costs is absent.

`broker_bench --bound` runs scenarios A and B against it with the same clients and the same
raw echo as the real broker, so the gap between the real broker and this bound is what the
actor layout costs, and the gap between this bound and the goal is the send path's own cost.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

TICK_MS = 10  # the store's periodic work (async flush, checkpoint), as the send actor ticks


def _serve(
    srv: socket.socket, root: str, topics: tuple[str, ...], ready: Any, props: dict[str, str]
) -> None:
    """Accept connections one after another and answer their sends until SIGTERM (also sent
    when the parent dies); `ready` gets one byte once the store is open and warm."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # run the finally: store shut down
    _die_with_parent()
    from actors.broker.config import BrokerConfig
    from actors.broker.context import BrokerContext
    from actors.broker.controller import BrokerControllerCore
    from actors.broker.events import TopicConfigChanged
    from actors.broker.index_service import broker_store_config
    from actors.broker.processors import BROKER_PROCESSOR_GROUPS
    from actors.broker.topic_config import TopicConfig
    from actors.core import Request
    from actors.runtime.watch import name_process
    from protocol.command import RemotingCommand
    from protocol.errors import ProtocolError
    from protocol.framing import FrameDecoder
    from store.config import StoreConfig
    from store.message_store import DefaultMessageStore

    name_process("bound")  # the CPU table's role (broker_bench.role_of); its index: python
    bc = BrokerConfig(namesrvAddr="127.0.0.1:9876")
    sc = broker_store_config(StoreConfig.from_properties({**props, "storePathRootDir": root}))
    sc.messageIndexProcessSpawn = True  # no IndexService actor here: the store spawns it
    store = DefaultMessageStore(sc)
    now = time.time_ns() // 1_000_000
    if not store.load(now):
        raise RuntimeError("store did not load")
    store.start(now)
    controller = BrokerControllerCore(bc, sc)
    controller.load(now)
    created = [TopicConfigChanged(TopicConfig(t, 4, 4), register=False) for t in topics]
    controller.apply_events(created, "admin", now)  # type: ignore[arg-type]
    group = next(g for g in BROKER_PROCESSOR_GROUPS if g.name == "send")
    ctx = BrokerContext(bc, sc, group="send", outbox=None, store=store)
    ctx.load_snapshot(controller.snapshot())
    core = group.build(ctx)
    fast = core.fast_path  # type: ignore[attr-defined]
    _wait_warm(store)
    os.write(ready, b"1")
    os.close(ready)
    next_tick = now + TICK_MS
    try:
        while True:
            conn, peer = srv.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            decoder = FrameDecoder()  # the broker's own splitter (views, a bounded length)
            while True:
                data = conn.recv(1 << 20)
                try:
                    frames = decoder.feed(data) if data else None
                except ProtocolError:
                    frames = None
                if frames is None:
                    conn.close()
                    break
                now = time.time_ns() // 1_000_000
                out = []
                for frame in frames:
                    reply = fast(frame, 1, peer, now)
                    if reply is None:  # a topic's first send (name check): general path
                        cmd = RemotingCommand.decode(frame)
                        resp = core.process(Request(1, peer, cmd, 0), now)
                        reply = resp.encode() if resp is not None else b""
                    out.append(reply)
                if out:
                    conn.sendall(b"".join(out))
                if now >= next_tick:
                    next_tick = now + store.tick(now)
    finally:
        store.shutdown(time.time_ns() // 1_000_000)


def _wait_warm(store: object, limit_s: float = 120.0) -> None:
    """Serve once the next CommitLog segment is warm (its background warm-up of up to 1 GiB
    would otherwise be measured too), at most limit_s."""
    mfq = store.commitlog.mfq  # type: ignore[attr-defined]
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        got = mfq.next_to_warm()
        if got is not None and got[1] >= got[0].file_size:
            return
        time.sleep(0.05)
    log.warning("bound server: next segment not warm after %.0f s, serving anyway", limit_s)


def _die_with_parent() -> None:
    """SIGTERM this process when its parent dies (prctl PR_SET_PDEATHSIG), so a killed bench
    or test run leaves no server behind; best effort off Linux."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@contextmanager
def inline_server(
    topics: tuple[str, ...], props: dict[str, str] | None = None, ready_s: float = 180.0
) -> Iterator[tuple[tuple[str, int], list[int]]]:
    """((host, port), [server pid, IndexService pid]) of a bound server that is ready to serve
    (store open, next segment warm); stopped after. `props`: broker.conf store settings
    (defaults: the broker's)."""
    srv = socket.socket()
    root = tempfile.mkdtemp(prefix="amq-bound-")
    proc: Any = None
    r, w = os.pipe()
    try:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        ctx = multiprocessing.get_context("fork")
        proc = ctx.Process(target=_serve, args=(srv, root, topics, w, dict(props or {})),
                           daemon=True, name="amq-bound")  # fmt: skip
        proc.start()
        os.close(w)
        w = -1
        if not select.select([r], [], [], ready_s)[0] or os.read(r, 1) != b"1":
            raise RuntimeError(f"bound server not ready within {ready_s:.0f} s")
        yield srv.getsockname(), [proc.pid or 0, *_children(proc.pid or 0)]
    finally:
        if proc is not None and proc.pid is not None:
            proc.terminate()  # SIGTERM: the finally above shuts the store (and its index process)
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
        srv.close()
        shutil.rmtree(root, ignore_errors=True)


def _children(pid: int, wait_s: float = 5.0) -> list[int]:
    """The processes `pid` spawned (its IndexService), waited for up to wait_s."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        if kids:
            return kids
        time.sleep(0.02)
    log.warning("bound server %d spawned no index process within %.0f s", pid, wait_s)
    return []
