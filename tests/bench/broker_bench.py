"""Broker benchmark: `python -m tests.bench.broker_bench` or `actormq bench`.

A: one connection, one SEND_MESSAGE_V2 (1 KiB) in flight, vs a raw Python loopback echo of
   1 KiB frames measured in the same run (goal >= 0.4x).
B: send 100, wait for the 100 responses, repeat (goal >= 100,000 msgs/s), twice: with JSON
   headers (what Java, ali-ons and the C++ clients send) and with msgpack headers (serialize
   type 2, ours: what our own clients send).
C: pull 200,000 stored messages, 32 per pull (goal >= 150,000 msgs/s).   [real cores only]
D: 500 msgs/s with a long-polling consumer, end-to-end p50 <= 1 ms, p99 <= 5 ms. [real cores]
E: replication (no goal in an issue: reported): once, after the runs, a slave broker starts
   empty and catches up with the master's whole commit log over the HA stream; bytes/s against
   a raw Python loopback TCP copy measured just before. [real cores]
Broker CPU microseconds per message (CPU time of the actor system's processes from
/proc/<pid>/schedstat) for A, B, C. The table shows the median and min-max of --runs runs.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from typing import Any

from actors.runtime.watch import AFFINITY_ENV

log = logging.getLogger(__name__)

BODY = b"x" * 1024
MSGPACK = 2  # protocol.codes.SerializeType.MSGPACK
TICK_US = 1_000_000 / os.sysconf("SC_CLK_TCK")


def _echo_server(sock: socket.socket) -> None:
    """Raw loopback echo: parse 4-byte-length frames, write each one back."""
    conn, _ = sock.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buf += data
        out = []
        pos = 0
        while len(buf) - pos >= 4:
            (n,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos < 4 + n:
                break
            out.append(buf[pos : pos + 4 + n])
            pos += 4 + n
        buf = buf[pos:]
        if out:
            conn.sendall(b"".join(out))


def raw_echo_rate(n: int) -> float:
    """Round trips per second of 1 KiB frames against a plain Python echo process."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_echo_server, args=(srv,), daemon=True)
    proc.start()
    try:
        c = socket.create_connection(srv.getsockname())
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frame = struct.pack(">i", len(BODY)) + BODY
        t0 = time.perf_counter()
        for _ in range(n):
            c.sendall(frame)
            need = len(frame)
            while need:
                need -= len(c.recv(65536))
        rate = n / (time.perf_counter() - t0)
        c.close()
        return rate
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
        srv.close()


def send_request(topic: str, queue_id: int, serialize_type: int = 0) -> Any:
    """A SEND_MESSAGE_V2 request as a Java producer writes it."""
    from protocol.command import RemotingCommand

    ext = {"a": "bench_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": "WAIT\x01true\x02TAGS\x01bench",
           "j": "0", "k": "false", "m": "false"}
    return RemotingCommand.request(310, ext, BODY, serialize_type=serialize_type)


def cpu_us(pids: list[int]) -> float:
    """CPU time of the processes in microseconds (schedstat nanoseconds when available)."""
    from deploy import procinfo

    return sum(procinfo.cpu_ns(p) for p in pids) / 1000.0


def role_of(pid: int) -> str:
    """An actor process's role from its name ("amq-send" -> "send"), else its name."""
    from actors.runtime.watch import PROCESS_NAME_PREFIX

    try:
        with open(f"/proc/{pid}/comm", encoding="ascii") as f:
            name = f.read().strip()
    except OSError:
        return "?"
    return name[len(PROCESS_NAME_PREFIX):] if name.startswith(PROCESS_NAME_PREFIX) else name


def cpu_by_role(pids: list[int]) -> dict[str, float]:
    """CPU microseconds per role (processes of the same role summed)."""
    from deploy import procinfo

    out: dict[str, float] = {}
    for p in pids:
        role = role_of(p)
        out[role] = out.get(role, 0.0) + procinfo.cpu_ns(p) / 1000.0
    return out


def _round_trip(sock: socket.socket, decoder: Any, buf: memoryview, frame: bytes) -> Any:
    """Write one request frame and read until a response frame is complete; it, decoded."""
    from protocol.command import RemotingCommand

    sock.sendall(frame)
    got: list[Any] = []
    while not got:
        k = sock.recv_into(buf)
        if not k:
            raise ConnectionError("broker closed the connection")
        got = decoder.feed(buf[:k])
    return RemotingCommand.decode(got[0])


def bench_a(addr: tuple[str, int], n: int, pids: list[int]) -> tuple[float, float]:
    """One in flight: (msgs/s, broker CPU us/msg).

    Like the raw echo client, the requests are encoded before the clock starts; every
    response is still decoded and checked (code 0, matching opaque).
    """
    from protocol.framing import FrameDecoder

    reqs = [send_request("BenchA", i % 4) for i in range(n + 1)]
    frames = [r.encode() for r in reqs]
    sock = socket.create_connection(addr, timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    decoder = FrameDecoder()
    buf = memoryview(bytearray(1 << 16))
    try:
        def round_trip(i: int) -> None:
            r = _round_trip(sock, decoder, buf, frames[i])
            if r.code != 0 or r.opaque != reqs[i].opaque:
                raise RuntimeError(f"send failed: {r.code} {r.remark}")

        round_trip(n)  # warm-up (topic creation)
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for i in range(n):
            round_trip(i)
        dt = time.perf_counter() - t0
        return n / dt, (cpu_us(pids) - c0) / n
    finally:
        sock.close()


def bench_b(addr: tuple[str, int], rounds: int, pids: list[int], serialize_type: int = 0,
            roles: dict[str, float] | None = None) -> tuple[float, float]:
    """100 in flight, repeated: (msgs/s, broker CPU us/msg); headers in `serialize_type`.

    `roles`, when given, receives the CPU us/msg of each actor role (see cpu_by_role).

    Each round's 100 requests are encoded before the clock starts and written in one send;
    every response is still decoded and matched by opaque (code 0), as a real client does.
    """
    from protocol.command import RemotingCommand
    from protocol.framing import FrameDecoder

    batches: list[tuple[bytes, list[int]]] = []
    for _ in range(rounds + 1):
        reqs = [send_request("BenchB", i % 4, serialize_type) for i in range(100)]
        batches.append((b"".join(r.encode() for r in reqs), [r.opaque for r in reqs]))
    sock = socket.create_connection(addr, timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    decoder = FrameDecoder()
    buf = memoryview(bytearray(1 << 20))
    decode = RemotingCommand.decode

    def round_trip(data: bytes, opaques: list[int]) -> None:
        pending = set(opaques)
        sock.sendall(data)
        while pending:
            n = sock.recv_into(buf)
            if not n:
                raise ConnectionError("broker closed the connection")
            for frame in decoder.feed(buf[:n]):
                r = decode(frame)
                if r.code != 0 or r.opaque not in pending:
                    raise RuntimeError(f"send failed: {r.code} {r.remark} opaque={r.opaque}")
                pending.discard(r.opaque)

    try:
        round_trip(*batches[rounds])  # warm-up (topic creation)
        r0 = cpu_by_role(pids)
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for i in range(rounds):
            round_trip(*batches[i])
        dt = time.perf_counter() - t0
        n = rounds * 100
        cpu = (cpu_us(pids) - c0) / n
        if roles is not None:
            for role, us in cpu_by_role(pids).items():
                roles[role] = (us - r0.get(role, 0.0)) / n
        return n / dt, cpu
    finally:
        sock.close()


def heartbeat_request(client_id: str, group: str, topic: str) -> Any:
    """HEART_BEAT (34) of a push consumer subscribed to `topic` with '*'."""
    import json

    from protocol.command import RemotingCommand

    sub = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
           "subVersion": 1, "tagsSet": [], "topic": topic}
    body = {"clientID": client_id,
            "consumerDataSet": [{"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                 "consumeType": "CONSUME_PASSIVELY", "groupName": group,
                                 "messageModel": "CLUSTERING", "subscriptionDataSet": [sub],
                                 "unitMode": False}],
            "producerDataSet": []}
    data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return RemotingCommand.request(34, None, data)


def pull_request(group: str, topic: str, queue_id: int, offset: int, max_nums: int,
                 suspend_ms: int = 0) -> Any:
    """PULL_MESSAGE (11); sysFlag 0x4 (subscription in the request) | 0x2 when suspending."""
    from protocol.command import RemotingCommand

    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id),
           "queueOffset": str(offset), "maxMsgNums": str(max_nums),
           "sysFlag": str(4 | (2 if suspend_ms else 0)), "commitOffset": "0",
           "suspendTimeoutMillis": str(suspend_ms), "subVersion": "0",
           "expressionType": "TAG", "subscription": "*"}
    return RemotingCommand.request(11, ext)


def _subscribe(cl: Any, group: str, topic: str) -> None:
    """Heartbeat the consumer group, then wait (bounded) until its replica accepts pulls."""
    r = cl.invoke(heartbeat_request(f"bench@{os.getpid()}", group, topic), 10)
    if r.code != 0:
        raise RuntimeError(f"heartbeat failed: {r.code} {r.remark}")
    for _ in range(200):  # the group reaches the pull actor one replication hop later
        r = cl.invoke(pull_request(group, topic, 0, 0, 1), 10)
        if r.code in (0, 19, 20, 21):
            return
        time.sleep(0.01)
    raise RuntimeError(f"pull never accepted for {group}/{topic}: {r.code} {r.remark}")


PRELOAD_BUSY_LIMIT = 10_000  # resends of SYSTEM_BUSY replies while preloading C

def bench_c(addr: tuple[str, int], total: int, pids: list[int], run: int = 0
            ) -> tuple[float, float]:
    """Pull `total` stored messages from one queue, 32 per pull: (msgs/s, CPU us/msg)."""
    from deploy.wire import BlockingClient

    topic = f"BenchC{run}"
    group = f"bench_cg{run}"
    with BlockingClient(addr) as cl:
        sent = busy = 0
        while sent < total:  # preload (not timed); a SYSTEM_BUSY reply is resent, as a
            k = min(100, total - sent)  # producer backs off and retries, and counted
            for r in cl.invoke_many([send_request(topic, 0) for _ in range(k)], 30):
                if r.code == 0:
                    sent += 1
                elif r.code == 2 and busy < PRELOAD_BUSY_LIMIT:
                    busy += 1
                else:
                    raise RuntimeError(f"send failed: {r.code} {r.remark}")
        if busy:
            log.warning("scenario C preload: %d sends answered SYSTEM_BUSY and resent", busy)
        _subscribe(cl, group, topic)
        offset = 0
        got = 0
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for _ in range(total):  # bounded: every pull moves at least one message
            if got >= total:
                break
            r = cl.invoke(pull_request(group, topic, 0, offset, 32), 30)
            if r.code != 0:
                raise RuntimeError(f"pull failed at {offset}: {r.code} {r.remark}")
            nxt = int(r.ext_fields["nextBeginOffset"])
            got += nxt - offset
            offset = nxt
        dt = time.perf_counter() - t0
        return got / dt, (cpu_us(pids) - c0) / max(got, 1)


def _d_sender(addr: tuple[str, int], topic: str, n: int, rate: float) -> None:
    """Child process: send n messages at `rate`/s, each body starting with monotonic_ns."""
    from deploy.wire import BlockingClient

    period = 1.0 / rate
    with BlockingClient(addr) as cl:
        t_next = time.monotonic()
        for _ in range(n):
            delay = t_next - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            t_next += period
            req = send_request(topic, 0)
            req.body = struct.pack(">q", time.monotonic_ns()) + BODY[8:]
            cl.invoke(req, 10)


def bench_d(addr: tuple[str, int], n: int, run: int = 0, rate: float = 500.0
            ) -> tuple[float, float, int]:
    """Long-polling consumer, sender at `rate`/s: (p50 ms, p99 ms, messages received)."""
    from deploy.wire import BlockingClient
    from protocol.message import decode_messages

    topic = f"BenchD{run}"
    group = f"bench_dg{run}"
    lat_ns: list[int] = []
    with BlockingClient(addr) as cl:
        r = cl.invoke(send_request(topic, 0), 10)  # creates the topic
        if r.code != 0:
            raise RuntimeError(f"send failed: {r.code} {r.remark}")
        _subscribe(cl, group, topic)
        offset = 1
        ctx = multiprocessing.get_context("fork")
        proc = ctx.Process(target=_d_sender, args=(addr, topic, n, rate), daemon=True)
        proc.start()
        try:
            deadline = time.monotonic() + n / rate + 30
            while len(lat_ns) < n and time.monotonic() < deadline:
                r = cl.invoke(pull_request(group, topic, 0, offset, 32, suspend_ms=15000), 20)
                now = time.monotonic_ns()
                if r.code == 0:
                    for m in decode_messages(bytes(r.body)):
                        lat_ns.append(now - struct.unpack_from(">q", bytes(m.body), 0)[0])
                if r.ext_fields and "nextBeginOffset" in r.ext_fields:
                    offset = int(r.ext_fields["nextBeginOffset"])
        finally:
            proc.join(n / rate + 30)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    if not lat_ns:
        raise RuntimeError("D: no message received")
    lat_ns.sort()
    p50 = lat_ns[len(lat_ns) // 2] / 1e6
    p99 = lat_ns[min(len(lat_ns) - 1, int(len(lat_ns) * 0.99))] / 1e6
    return p50, p99, len(lat_ns)


def raw_copy_rate(total: int = 256 << 20, chunk: int = 0) -> float:
    """Bytes/s of a plain loopback TCP copy in `chunk` pieces (0: the haTransferBatchSize
    default; a sender thread, this thread receiving)."""
    import threading

    from store.config import StoreConfig

    chunk = chunk or int(StoreConfig().haTransferBatchSize)
    lst = socket.create_server(("127.0.0.1", 0))
    port = lst.getsockname()[1]
    payload = b"r" * chunk

    def sender() -> None:
        with socket.create_connection(("127.0.0.1", port)) as out:
            for _ in range(total // chunk):
                out.sendall(payload)

    t = threading.Thread(target=sender, daemon=True)
    t0 = time.perf_counter()
    t.start()
    conn, _ = lst.accept()
    got = 0
    buf = bytearray(chunk)
    while got < total:
        n = conn.recv_into(buf)
        if not n:
            break
        got += n
    dt = time.perf_counter() - t0
    t.join(10)
    conn.close()
    lst.close()
    return got / dt


def bench_e(cluster: Any, data: str, ha_port: int, master_root: str
            ) -> tuple[float, int] | None:  # fmt: skip
    """Start an empty slave of the master and time its catch-up from its first replicated
    record (actor start-up left out); (bytes/s, bytes timed), or None when the catch-up was
    over before it could be timed."""
    from actors.broker.config import BrokerConfig
    from deploy import launch
    from store.config import StoreConfig
    from store.state_page import StatePage

    master = StatePage(os.path.join(master_root, "state"), writable=False)
    target = master.max_phy
    master.close()
    props = {"listenPort": "0", "brokerId": "1", "brokerRole": "SLAVE",
             "haMasterAddress": f"127.0.0.1:{ha_port}",
             "storePathRootDir": os.path.join(data, "slave-store")}  # fmt: skip
    launch.start_broker(cluster, BrokerConfig.from_properties(props),
                        StoreConfig.from_properties(props))  # fmt: skip
    slave = StatePage(os.path.join(props["storePathRootDir"], "state"), writable=False)
    try:
        deadline = time.perf_counter() + 600
        first = 0
        t0 = time.perf_counter()
        while slave.max_phy < target and time.perf_counter() < deadline:
            if not first and slave.max_phy > 0:
                first, t0 = slave.max_phy, time.perf_counter()
            time.sleep(0.002)
        dt = time.perf_counter() - t0
        if slave.max_phy < target or not first or first >= target or dt <= 0:
            return None
        return (target - first) / dt, target - first
    finally:
        slave.close()


def start_sync_pair(cluster: Any, data: str) -> tuple[tuple[str, int], str]:
    """A SYNC_MASTER broker ("broker-f") and its slave in the cluster; (master address,
    master store root) once the slave is connected."""
    from actors.broker.config import BrokerConfig
    from deploy import launch
    from store.config import StoreConfig
    from store.state_page import OFF_HA_SLAVES, StatePage

    ha_port = launch.stable_free_port()
    root = os.path.join(data, "f-master")
    props = {"listenPort": "0", "brokerName": "broker-f", "brokerRole": "SYNC_MASTER",
             "storePathRootDir": root, "haListenPort": str(ha_port)}  # fmt: skip
    port = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                               StoreConfig.from_properties(props))  # fmt: skip
    props = {"listenPort": "0", "brokerName": "broker-f", "brokerId": "1",
             "brokerRole": "SLAVE", "haMasterAddress": f"127.0.0.1:{ha_port}",
             "storePathRootDir": os.path.join(data, "f-slave")}  # fmt: skip
    launch.start_broker(cluster, BrokerConfig.from_properties(props),
                        StoreConfig.from_properties(props))  # fmt: skip
    st = StatePage(os.path.join(root, "state"), writable=False)
    try:
        deadline = time.monotonic() + 60
        while st.get(OFF_HA_SLAVES) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        if st.get(OFF_HA_SLAVES) < 1:
            raise RuntimeError("F: the slave never connected to the SYNC_MASTER")
    finally:
        st.close()
    return ("127.0.0.1", port), root


def bench_f(addr: tuple[str, int], n: int, pids: list[int]) -> tuple[float, float, float, float]:
    """SYNC_MASTER, one WAIT send in flight, one slave: (msgs/s, p50 ms, p99 ms, CPU us/msg);
    every answer must be SUCCESS (a slave has the message), as GroupTransferService gives."""
    from protocol.framing import FrameDecoder

    reqs = [send_request("BenchF", 0) for _ in range(n + 20)]
    frames = [r.encode() for r in reqs]
    lat: list[int] = []
    with socket.create_connection(addr, timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        decoder = FrameDecoder()
        buf = memoryview(bytearray(1 << 16))

        def round_trip(i: int) -> int:
            t = time.perf_counter_ns()
            r = _round_trip(sock, decoder, buf, frames[i])
            dt = time.perf_counter_ns() - t
            if r.code != 0 or r.opaque != reqs[i].opaque:
                raise RuntimeError(f"F: send answered {r.code} {r.remark}")
            return dt

        deadline = time.monotonic() + 30
        for i in range(n, n + 20):  # warm-up: topic creation, then the slave's first acks
            while True:
                try:
                    round_trip(i)
                    break
                except RuntimeError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for i in range(n):
            lat.append(round_trip(i))
        dt = time.perf_counter() - t0
    lat.sort()
    return (n / dt, lat[n // 2] / 1e6, lat[min(n - 1, int(n * 0.99))] / 1e6,
            (cpu_us(pids) - c0) / n)  # fmt: skip


def run_bound(args: argparse.Namespace) -> dict[str, list[float]]:
    """A and B against tests.bench.send_bound's one-process server, --runs times."""
    from tests.bench.send_bound import inline_server

    results: dict[str, list[float]] = {}

    def add(key: str, val: float) -> None:
        results.setdefault(key, []).append(val)

    props = getattr(args, "bound_props", None)  # store settings (tests: small files)
    with inline_server(("BenchA", "BenchB"), props) as (addr, pids):
        for _ in range(args.runs):
            raw = raw_echo_rate(args.a)
            add("raw", raw)
            rate, cpu = bench_a(addr, args.a, pids)
            add("A", rate)
            add("A_ratio", rate / raw)
            add("A_cpu", cpu)
            if args.b:
                for key, st in (("B", 0), ("Bm", MSGPACK)):
                    roles: dict[str, float] = {}
                    rate, cpu = bench_b(addr, args.b, pids, st, roles=roles)
                    add(key, rate)
                    add(f"{key}_cpu", cpu)
                    for role, us in roles.items():
                        add(f"{key}_cpu:{role}", us)
    return results


def run(args: argparse.Namespace) -> dict[str, list[float]]:
    """Start a cluster like `actormq up`, run the scenarios --runs times, stop it."""
    from actors.broker.config import BrokerConfig
    from deploy import launch
    from store.config import StoreConfig
    from tests.integration.conftest import cluster_pids

    real = args.personality is None
    results: dict[str, list[float]] = {}

    def add(key: str, val: float) -> None:
        results.setdefault(key, []).append(val)

    if args.affinity:  # inherited by the actor system's processes (see actors.runtime.watch)
        os.environ[AFFINITY_ENV] = args.affinity
    with tempfile.TemporaryDirectory(prefix="amq-bench-") as data:
        data = os.environ.get("AMQ_BENCH_DATA", data)  # keep the logs: an existing dir
        cluster = launch.start_system(data, log_level="WARNING")
        try:
            ha_port = launch.stable_free_port()
            props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store"),
                     "haListenPort": str(ha_port)}  # fmt: skip
            bc = BrokerConfig.from_properties(props)
            sc = StoreConfig.from_properties(props)
            port = launch.start_broker(cluster, bc, sc, personality=args.personality)
            addr = ("127.0.0.1", port)
            pids = [p for p in cluster_pids(cluster) if p != os.getpid()]
            for i in range(args.runs):
                raw = raw_echo_rate(args.a)
                add("raw", raw)
                if args.a:
                    rate, cpu = bench_a(addr, args.a, pids)
                    add("A", rate)
                    add("A_ratio", rate / raw)
                    add("A_cpu", cpu)
                if args.b:
                    roles: dict[str, float] = {}
                    rate, cpu = bench_b(addr, args.b, pids, roles=roles)
                    add("B", rate)
                    add("B_cpu", cpu)
                    for role, us in roles.items():
                        add(f"B_cpu:{role}", us)
                    roles = {}
                    rate, cpu = bench_b(addr, args.b, pids, MSGPACK, roles=roles)
                    add("Bm", rate)
                    add("Bm_cpu", cpu)
                    for role, us in roles.items():
                        add(f"Bm_cpu:{role}", us)
                if real and args.c:
                    rate, cpu = bench_c(addr, args.c, pids, i)
                    add("C", rate)
                    add("C_cpu", cpu)
                if real and args.d:
                    p50, p99, _n = bench_d(addr, args.d, i)
                    add("D_p50", p50)
                    add("D_p99", p99)
            if real and args.f:
                f_addr, _root = start_sync_pair(cluster, data)
                f_pids = [p for p in cluster_pids(cluster) if p != os.getpid()]
                for _ in range(args.runs):
                    rate, p50, p99, cpu = bench_f(f_addr, args.f, f_pids)
                    add("F", rate)
                    add("F_p50", p50)
                    add("F_p99", p99)
                    add("F_cpu", cpu)
            if real and args.e:
                add("E_raw", raw_copy_rate())
                timed = bench_e(cluster, data, ha_port, props["storePathRootDir"])
                if timed is not None:  # else caught up before the first look: no figure
                    rate, size = timed
                    add("E", rate)
                    add("E_ratio", rate / results["E_raw"][-1])
                    add("E_bytes", float(size))
        finally:
            launch.stop_cluster(cluster)
    return results


ROWS = (  # scenario, rate key, ratio key, cpu key, goal
    ("raw echo (1 KiB, 1 in flight)", "raw", None, None, "baseline, round trips/s"),
    ("A send, 1 in flight", "A", "A_ratio", "A_cpu", ">= 0.4x raw"),
    ("B send, 100 in flight, JSON", "B", None, "B_cpu", ">= 100,000 msgs/s"),
    ("B same, msgpack header", "Bm", None, "Bm_cpu", ">= 100,000 msgs/s"),
    ("C pull 32/pull", "C", None, "C_cpu", ">= 150,000 msgs/s"),
)


def _cell(vals: list[float] | None, fmt: str) -> str:
    if not vals:
        return "-"
    med = statistics.median(vals)
    return f"{med:{fmt}} ({min(vals):{fmt}}-{max(vals):{fmt}})"


def format_table(results: dict[str, list[float]]) -> str:
    """Per scenario: median (min-max) over the runs, ratio to raw echo, broker CPU us/msg."""
    runs = max((len(v) for v in results.values()), default=0)
    lines = [f"broker benchmark, {runs} run(s); median (min-max)",
             f"{'scenario':32s} {'msgs/s':>26s} {'x raw echo':>18s} {'CPU us/msg':>18s}  goal"]
    for name, rate, ratio, cpu, goal in ROWS:
        if rate not in results:
            continue
        lines.append(f"{name:32s} {_cell(results.get(rate), ',.0f'):>26s} "
                     f"{_cell(results.get(ratio) if ratio else None, '.2f'):>18s} "
                     f"{_cell(results.get(cpu) if cpu else None, '.1f'):>18s}  {goal}")
    for key, label in (("B_cpu:", "B JSON"), ("Bm_cpu:", "B msgpack")):
        parts = sorted(
            ((k[len(key):], statistics.median(v)) for k, v in results.items()
             if k.startswith(key)),
            key=lambda kv: -kv[1],
        )
        busy = [f"{role} {us:.1f}" for role, us in parts if us >= 0.05]
        if busy:
            lines.append(f"{label + ' CPU us/msg by process':32s} " + ", ".join(busy))
    if "E" in results:
        mbs = _cell([v / 1e6 for v in results["E"]], ".1f")
        lines.append(f"{'E slave catch-up, MB/s':32s} {mbs:>26s} "
                     f"{_cell(results['E_ratio'], '.2f'):>18s}  x raw TCP copy "
                     f"({statistics.median(results['E_raw']) / 1e6:.0f} MB/s), "
                     f"{statistics.median(results['E_bytes']) / 1e6:.0f} MB timed")
    if "F" in results:
        lines.append(
            f"{'F SYNC_MASTER, 1 WAIT in flight':32s} {_cell(results['F'], ',.0f'):>26s} "
            f"{'-':>18s} {_cell(results['F_cpu'], '.1f'):>18s}  (reported; all processes)"
        )
        lines.append(
            f"{'F send latency with a slave, ms':32s} p50 {_cell(results['F_p50'], '.2f')}"
            f"  p99 {_cell(results['F_p99'], '.2f')}"
        )
    if "D_p50" in results:
        lines.append(f"{'D long-poll e2e latency, ms':32s} p50 {_cell(results['D_p50'], '.2f')}"
                     f"  p99 {_cell(results['D_p99'], '.2f')}  goal p50 <= 1, p99 <= 5")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """CLI entry."""
    p = argparse.ArgumentParser(prog="broker_bench")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--a", type=int, default=2000, help="A: requests (0 = skip)")
    p.add_argument("--b", type=int, default=100, help="B: rounds of 100 (0 = skip)")
    p.add_argument("--c", type=int, default=200_000, help="C: messages to pull (0 = skip)")
    p.add_argument("--d", type=int, default=2500, help="D: messages at 500/s (0 = skip)")
    p.add_argument("--e", type=int, default=1, help="E: replication catch-up (0 = skip)")
    p.add_argument("--f", type=int, default=1000,
                   help="F: WAIT sends to a SYNC_MASTER with one slave (0 = skip)")
    p.add_argument("--affinity", default=None,
                   help='pin actors to CPUs, e.g. "RemotingServer:0,send:1" (actor group or class)')
    p.add_argument("--personality", default=None,
                   help="actors.runtime.echo to measure the runtime alone (A and B only)")
    p.add_argument("--bound", action="store_true",
                   help="A and B against one process running the send core inline, no actors "
                        "(tests.bench.send_bound): the ceiling of any layout of this send path")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be >= 1")
    if not args.a:
        args.a = 1000  # the raw echo still needs a count
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.stdout.write(format_table(run_bound(args) if args.bound else run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
