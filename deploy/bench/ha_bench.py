"""Replication scenarios of the broker benchmark (E and F; actormq only).

E: once, after the runs, a slave broker starts empty and catches up with the master's whole
   commit log over the HA stream (HAService / HAClient); bytes/s against a raw Python loopback
   TCP copy measured just before.
F: a SYNC_MASTER with one slave, one WAIT send in flight (GroupTransferService answers once the
   slave has it): sends/s, latency and CPU of every process.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from deploy.bench.measure import cpu_us, one_round_trip
from deploy.bench.requests import send_request


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

        def timed_send(i: int) -> int:
            t = time.perf_counter_ns()
            r = one_round_trip(sock, decoder, buf, frames[i])
            dt = time.perf_counter_ns() - t
            if r.code != 0 or r.opaque != reqs[i].opaque:
                raise RuntimeError(f"F: send answered {r.code} {r.remark}")
            return dt

        deadline = time.monotonic() + 30
        for i in range(n, n + 20):  # warm-up: topic creation, then the slave's first acks
            while True:
                try:
                    timed_send(i)
                    break
                except RuntimeError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        c0 = cpu_us(pids)
        t0 = time.perf_counter()
        for i in range(n):
            lat.append(timed_send(i))
        dt = time.perf_counter() - t0
    lat.sort()
    return (n / dt, lat[n // 2] / 1e6, lat[min(n - 1, int(n * 0.99))] / 1e6,
            (cpu_us(pids) - c0) / n)  # fmt: skip
