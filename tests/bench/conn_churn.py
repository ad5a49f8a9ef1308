"""Connection churn: how fast the broker's RemotingServer and the name server accept and close.

`python -m tests.bench.conn_churn [--n 2000] [--runs 3]`: one client opens and closes N TCP
connections as fast as it can (connect, close, next), against the broker port and then the
name server port of a real `actormq up`-style cluster. A round ends when the server process
holds no more descriptors than before it (every connection accepted and closed on its side);
the figure is N / that time, median and min-max of --runs rounds, beside the client's own
connect+close rate (the limit of one client on this host) and a raw Python epoll server that
only accepts and closes, measured the same way in the same run (the ceiling of any Python
server here).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import select
import socket
import statistics
import sys
import tempfile
import time

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 60.0


def fd_count(pid: int) -> int:
    """Open descriptors of a process (-1 when it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def churn(port: int, n: int) -> float:
    """Open and close n connections to 127.0.0.1:port, one after the other; seconds taken."""
    t0 = time.perf_counter()
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            pass
        s.close()
    return time.perf_counter() - t0


def drained_rate(pid: int, port: int, n: int, baseline: int) -> tuple[float, float]:
    """(server accept+close per second, client connect+close per second) for one round."""
    t0 = time.perf_counter()
    client_s = churn(port, n)
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while fd_count(pid) > baseline and time.monotonic() < deadline:
        time.sleep(0.001)
    total = time.perf_counter() - t0
    if fd_count(pid) < 0:
        raise RuntimeError(f"server process {pid} died during the round")
    if fd_count(pid) > baseline:
        raise RuntimeError(f"server process {pid} still holds {fd_count(pid) - baseline} "
                           f"connections {DRAIN_TIMEOUT_S:.0f} s later")  # fmt: skip
    return n / total, n / client_s


def _raw_server(sock: socket.socket) -> None:
    """Accept and close, nothing else: epoll, non-blocking, as the actors' loop does."""
    ep = select.epoll()
    sock.setblocking(False)
    ep.register(sock.fileno(), select.EPOLLIN)
    conns: dict[int, socket.socket] = {}
    while True:
        for fd, _ in ep.poll():
            if fd == sock.fileno():
                while True:
                    try:
                        c, _ = sock.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    conns[c.fileno()] = c
                    ep.register(c.fileno(), select.EPOLLIN)
                continue
            c = conns.pop(fd)
            try:
                data = c.recv(65536)
            except OSError:
                data = b""
            if data:
                conns[fd] = c
                continue
            ep.unregister(fd)
            c.close()


def raw_rates(n: int, runs: int) -> list[float]:
    """The raw epoll accept+close server's rates for `runs` rounds of n connections."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1024)
    proc = multiprocessing.get_context("fork").Process(target=_raw_server, args=(lst,),
                                                       daemon=True)  # fmt: skip
    proc.start()
    lst.close()
    try:
        from deploy import procinfo

        assert proc.pid is not None
        port = 0
        for _ in range(100):  # until the child holds the listener (the parent closed its copy)
            held = procinfo.listeners_of([proc.pid])
            if held:
                port = held[0][2]
                break
            time.sleep(0.01)
        time.sleep(0.2)
        baseline = fd_count(proc.pid)
        return [drained_rate(proc.pid, port, n, baseline)[0] for _ in range(runs)]
    finally:
        proc.kill()
        proc.join(5)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one line per server."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="connections per round")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from actors.broker.config import BrokerConfig
    from deploy import launch, procinfo
    from store.config import StoreConfig

    data = tempfile.mkdtemp(prefix="churn-")
    cluster = launch.start_system(data)
    try:
        ns_port = launch.start_namesrv(cluster, port=0)
        props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store"),
                 "namesrvAddr": f"127.0.0.1:{ns_port}", "mappedFileSizeCommitLog": "4194304",
                 "maxHashSlotNum": "4096", "maxIndexNum": "16384"}  # fmt: skip
        port = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                                   StoreConfig.from_properties(props))  # fmt: skip
        for name, p in (("broker RemotingServer", port), ("name server", ns_port)):
            pid = procinfo.pid_listening_on(p)
            assert pid is not None, f"nothing listens on {p}"
            time.sleep(0.5)
            baseline = fd_count(pid)
            rates, client = [], []
            for _ in range(args.runs):
                r, c = drained_rate(pid, p, args.n, baseline)
                rates.append(r)
                client.append(c)
            sys.stdout.write(
                f"{name}: {statistics.median(rates):,.0f} accept+close/s "
                f"({min(rates):,.0f}-{max(rates):,.0f}) for {args.n} connections x {args.runs}; "
                f"the client alone {statistics.median(client):,.0f} connect+close/s\n")
    finally:
        launch.stop_cluster(cluster)
    raw = raw_rates(args.n, args.runs)
    sys.stdout.write(f"raw Python epoll accept+close server: {statistics.median(raw):,.0f}/s "
                     f"({min(raw):,.0f}-{max(raw):,.0f})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
