"""B's ladder: how fast a broker written in this interpreter can be, step by step, beside the
reference RocketMQ 4.9.8 in one run (`actormq bench --floor`).

Mirrors nothing in RocketMQ. Scenario B (100 SEND_MESSAGE_V2 of 1 KiB written at once, every
answer decoded and matched, deploy.bench.broker_bench.BSender) against each rung, the rungs in
turn and the order reversed every run, each warmed alike first:

- reference: Apache RocketMQ 4.9.8 (deploy.reference), both JVMs.
- floor:     one process doing only what no broker can skip: split the frames (FrameDecoder),
             read each request's header (protocol.command.request_parts, the broker's own
             reader) and render its SUCCESS answer from a ResponseTemplate. No store.
- floor+hop: the floor with the design's one hop: a relay process owns the client socket,
             routes each frame by its request code (actors.remoting.router.request_code) over
             a Unix socket to a worker process as a channel REQUEST record
             (actors.runtime.channel), the worker answers as the floor does, the relay writes
             the REPLY records to the client. No store.
- bound:     deploy.bench.send_bound: the broker's send core and store in one process.
- actormq:   `actormq up`'s broker, every actor.

Each row: msgs/s, the per-run ratio to the reference, and the rung's CPU per message split
into user and system time (the kernel's share is paging the store in and the sockets: the same
work on both brokers, so the user time is what the interpreter costs).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import select
import selectors
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Final

from deploy.bench.bench_table import cell

log = logging.getLogger(__name__)

RUNGS: Final = ("reference", "floor", "floor+hop", "bound", "actormq")
BUFFER: Final = 4 << 20  # socket buffers: a round (100 x ~1.3 KiB) never fills one
MSG_ID: Final = "7F00000100002A9F0000000000000000"  # every answer's msgId (never read)
TOPIC: Final = "BenchB"  # B's topic (broker_bench.b_batches' default), made by the bound server


class FloorAnswers:
    """The floor's per-request work: the header read, the answer rendered (queue offsets
    counted per queue id, as a store would hand them out)."""

    def __init__(self) -> None:
        from protocol.codes import RequestCode
        from protocol.command import ResponseTemplate

        self.code = int(RequestCode.SEND_MESSAGE_V2)
        self.template = ResponseTemplate({"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"},
                                         ("msgId", "queueId", "queueOffset"))  # fmt: skip
        self.offsets: dict[str, int] = {}

    def answer(self, frame: memoryview) -> bytes:
        """The encoded SUCCESS answer of a SEND_MESSAGE_V2 frame (ValueError for another)."""
        from protocol.command import request_parts

        parts = request_parts(frame, self.code)
        if parts is None:
            raise ValueError("not a two-way SEND_MESSAGE_V2 with a readable header")
        opaque, ext, _body, st = parts
        qid = ext.get("e", "0")
        off = self.offsets.get(qid, 0)
        self.offsets[qid] = off + 1
        return self.template.frame_plain(st, opaque, (MSG_ID, qid, str(off)))


def _tune(sock: socket.socket) -> None:
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        sock.setsockopt(socket.SOL_SOCKET, opt, BUFFER)


def _serve_floor(srv: socket.socket, ready: int) -> None:
    """The one-process floor: connections one after another, until SIGTERM."""
    from actors.runtime.watch import die_with_parent, name_process
    from protocol.framing import FrameDecoder

    die_with_parent()
    name_process("floor")
    answers = FloorAnswers()
    os.write(ready, b"1")
    while True:
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        decoder = FrameDecoder()
        while True:
            data = conn.recv(1 << 20)
            if not data:
                conn.close()
                break
            out = [answers.answer(frame) for frame in decoder.feed(data)]
            if out:
                conn.sendall(b"".join(out))


def _serve_worker(chan: socket.socket) -> None:
    """The hop's worker: REQUEST records in, REPLY records out, until the relay is gone."""
    from actors.runtime.channel import REQUEST, RecordDecoder, add_reply
    from actors.runtime.watch import die_with_parent, name_process

    die_with_parent()
    name_process("floor-worker")
    answers = FloorAnswers()
    decoder = RecordDecoder()
    out = bytearray()
    while True:
        data = chan.recv(1 << 20)
        if not data:
            return
        for rec in decoder.feed(data):
            if rec[0] == REQUEST:
                add_reply(out, rec[1], answers.answer(rec[4]))
        if out:
            chan.sendall(out)
            out.clear()


def _serve_relay(srv: socket.socket, chan: socket.socket, ready: int) -> None:
    """The hop's relay: owns the client sockets, routes frames to the worker by request code,
    writes the worker's replies back; until SIGTERM."""
    from actors.remoting.router import request_code
    from actors.runtime.channel import REPLY, RecordDecoder, add_request, ip_to_int
    from actors.runtime.watch import die_with_parent, name_process
    from protocol.framing import FrameDecoder

    die_with_parent()
    name_process("floor-relay")
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    sel.register(chan, selectors.EVENT_READ)
    clients: dict[int, tuple[socket.socket, FrameDecoder, int, int]] = {}
    replies = RecordDecoder()
    out = bytearray()
    code = FloorAnswers().code
    os.write(ready, b"1")
    while True:
        for key, _ in sel.select():
            sock = key.fileobj
            if sock is srv:
                conn, peer = srv.accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                clients[conn.fileno()] = (conn, FrameDecoder(), ip_to_int(peer[0]), peer[1])
                sel.register(conn, selectors.EVENT_READ)
            elif sock is chan:
                data = chan.recv(1 << 20)
                if not data:
                    return
                by_conn: dict[int, list[Any]] = {}
                for rec in replies.feed(data):
                    if rec[0] == REPLY:
                        by_conn.setdefault(rec[1], []).append(rec[2])
                for conn_id, frames in by_conn.items():
                    got = clients.get(conn_id)
                    if got is not None:
                        got[0].sendall(b"".join(frames))
            else:
                assert isinstance(sock, socket.socket)
                conn, decoder, ip, port = clients[sock.fileno()]
                data = conn.recv(1 << 20)
                if not data:
                    sel.unregister(conn)
                    del clients[conn.fileno()]
                    conn.close()
                    continue
                now = time.monotonic_ns()
                for frame in decoder.feed(data):  # B sends nothing else: other codes dropped
                    if request_code(frame) == code:  # the route: the send group's channel
                        add_request(out, conn.fileno(), now, ip, port, frame)
                if out:
                    chan.sendall(out)
                    out.clear()


@contextmanager
def floor_server(hop: bool, ready_s: float = 30.0) -> Iterator[tuple[tuple[str, int], list[int]]]:
    """((host, port), pids) of a floor server (with the relay's hop when `hop`), stopped by
    PID after."""
    ctx = multiprocessing.get_context("fork")
    srv = socket.socket()
    procs: list[Any] = []
    pair: tuple[socket.socket, ...] = ()  # the hop's channel: the children keep their ends
    r, w = os.pipe()
    try:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        if hop:
            pair = near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            _tune(near)
            _tune(far)
            procs.append(ctx.Process(target=_serve_worker, args=(far,), daemon=True))
            procs.append(ctx.Process(target=_serve_relay, args=(srv, near, w), daemon=True))
        else:
            procs.append(ctx.Process(target=_serve_floor, args=(srv, w), daemon=True))
        for p in procs:
            p.start()
        for end in pair:
            end.close()
        if not select.select([r], [], [], ready_s)[0] or os.read(r, 1) != b"1":
            raise RuntimeError(f"floor server not ready within {ready_s:.0f} s")
        yield srv.getsockname(), [p.pid for p in procs]
    finally:
        for p in procs:
            if p.pid is not None:
                p.terminate()
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join(5)
        for end in pair:
            end.close()
        os.close(r)
        os.close(w)
        srv.close()


def user_sys_ticks(pids: list[int]) -> tuple[int, int]:
    """(user, system) CPU clock ticks of the processes, every thread of each."""
    from deploy.procinfo import stat_fields

    user = system = 0
    for pid in pids:
        fields = stat_fields(pid)
        if fields is not None:
            user += int(fields[11])
            system += int(fields[12])
    return user, system


def timed_b(addr: tuple[str, int], rounds: int, pids: list[int]) -> dict[str, float]:
    """broker_bench.bench_b against one rung (`rounds` rounds of 100): msgs/s, CPU us/msg
    (every thread of `pids`), and that CPU split into user and system time by the kernel's
    tick counts over the same run."""
    from deploy.bench.broker_bench import bench_b

    u0, s0 = user_sys_ticks(pids)
    rate, cpu = bench_b(addr, rounds, pids)
    u1, s1 = user_sys_ticks(pids)
    ticks = (u1 - u0) + (s1 - s0)
    user = cpu * (u1 - u0) / ticks if ticks else cpu
    return {"rate": rate, "cpu": cpu, "user": user, "sys": cpu - user}


def warm(addr: tuple[str, int], pids: list[int], seconds: float) -> None:
    """broker_bench.warm_up's untimed B against one rung for `seconds` (at least one run)."""
    from deploy.bench.broker_bench import warm_up

    warm_up("B", addr, pids, argparse.Namespace(a=0, b=50, c=0, d=0), seconds, msgpack=False)


@contextmanager
def _actormq(data: str) -> Iterator[tuple[tuple[str, int], list[int]]]:
    """`actormq up`'s broker (its own name server and actors) in `data`, stopped after."""
    from actors.broker.config import BrokerConfig
    from deploy import launch
    from store.config import StoreConfig

    cluster = launch.start_system(data, log_level="WARNING")
    try:
        props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store"),
                 "haListenPort": "-1"}  # fmt: skip
        port = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                                   StoreConfig.from_properties(props))  # fmt: skip
        pids = [p for p in launch.cluster_pids(cluster) if p != os.getpid()]
        yield ("127.0.0.1", port), pids
    finally:
        launch.stop_cluster(cluster)


@contextmanager
def _reference(data: str) -> Iterator[tuple[tuple[str, int], list[int]]]:
    from deploy import procinfo, reference

    ref = reference.reference_cluster(os.path.join(data, "reference")).launch()
    try:
        ref.wait_ready()
        sid = ref.pid()
        assert sid is not None  # launched
        yield ("127.0.0.1", ref.broker_port), procinfo.pids_in_session(sid)
    finally:
        ref.stop()


def _rung(name: str, data: str) -> Any:
    from deploy.bench.send_bound import inline_server

    starts: dict[str, Callable[[], Any]] = {
        "reference": lambda: _reference(data),
        "floor": lambda: floor_server(hop=False),
        "floor+hop": lambda: floor_server(hop=True),
        "bound": lambda: inline_server((TOPIC,)),
        "actormq": lambda: _actormq(os.path.join(data, "actormq")),
    }
    return starts[name]()


def run(rungs: tuple[str, ...], runs: int, rounds: int, warmup_s: float
        ) -> dict[str, list[dict[str, float]]]:  # fmt: skip
    """Every rung up at once (started before any is timed), each warmed for warmup_s, then
    `runs` runs of B against each in turn (the order reversed every run); stopped after."""
    results: dict[str, list[dict[str, float]]] = {name: [] for name in rungs}
    with tempfile.TemporaryDirectory(prefix="amq-floor-") as data, ExitStack() as stack:
        up = [(name, *stack.enter_context(_rung(name, data))) for name in rungs]
        for name, addr, pids in up:
            log.info("warming %s at %s:%d for %.0f s", name, *addr, warmup_s)
            warm(addr, pids, warmup_s)
        for i in range(runs):
            for name, addr, pids in up if i % 2 == 0 else up[::-1]:
                results[name].append(timed_b(addr, rounds, pids))
    return results


def format_ladder(results: dict[str, list[dict[str, float]]]) -> str:
    """One row a rung: msgs/s and CPU us/msg (user, system) medians with their spread, and
    the per-run ratio to the reference when it ran."""
    ref = results.get("reference")
    runs = max((len(v) for v in results.values()), default=0)
    lines = [f"B ladder, {runs} run(s) of each rung; median (min-max)",
             f"{'rung':12s} {'msgs/s':>26s} {'/ reference':>18s} {'CPU us/msg':>20s} "
             f"{'user':>8s} {'system':>8s}"]  # fmt: skip
    for name, rows in results.items():
        if not rows:
            continue
        ratio = [r["rate"] / f["rate"] for r, f in zip(rows, ref, strict=False)] if ref else None
        lines.append(
            f"{name:12s} {cell([r['rate'] for r in rows], ',.0f'):>26s} "
            f"{cell(ratio, '.2f') if ratio else '-':>18s} "
            f"{cell([r['cpu'] for r in rows], '.1f'):>20s} "
            f"{statistics.median(r['user'] for r in rows):>8.1f} "
            f"{statistics.median(r['sys'] for r in rows):>8.1f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """CLI entry (`actormq bench --floor ...`)."""
    p = argparse.ArgumentParser(prog="actormq bench --floor", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="timed runs of each rung (default 3)")
    p.add_argument("--b", type=int, default=3000, help="rounds of 100 sends a run (default 3000)")
    p.add_argument("--warmup", type=float, default=10.0, metavar="SECONDS",
                   help="untimed B against each rung before the first run (default 10)")
    p.add_argument("--rungs", default=",".join(RUNGS),
                   help=f"comma-separated, of {', '.join(RUNGS)} (default: all)")
    args = p.parse_args(argv)
    rungs = tuple(r.strip() for r in args.rungs.split(",") if r.strip())
    unknown = [r for r in rungs if r not in RUNGS]
    if unknown or not rungs:
        p.error(f"--rungs: unknown {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(RUNGS)}")  # fmt: skip
    if args.runs < 1 or args.b < 1 or not 0 <= args.warmup < float("inf"):
        p.error("--runs and --b must be >= 1, --warmup a number of seconds >= 0")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.stdout.write(format_ladder(run(rungs, args.runs, args.b, args.warmup)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
