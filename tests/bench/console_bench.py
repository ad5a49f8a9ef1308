"""How fast the console's pages render against a big cluster (issue #24: under 300 ms with 1,000
topics and 200 groups).

    python -m tests.bench.console_bench [--topics 1000] [--groups 200] [--runs 20]

Starts `actormq up` (console off) and a separate `actormq console` (sampling every 10 s, as
`up` runs it), creates the topics and the groups (each group with offsets on one topic and a
backlog, so its lag is real), sends a few messages, then times each page: one untimed load,
then `--runs` loads through a kept HTTP connection; prints median and spread (min-max) per page
beside the goal. Every process it starts is stopped by PID.
"""

from __future__ import annotations

import argparse
import http.client
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

GOAL_MS = 300.0


def populate(broker: str, topics: int, groups: int) -> tuple[list[str], list[str]]:
    """Create the topics and groups over one kept admin connection; (topics, groups)."""
    from deploy.admin_ext import call
    from protocol.codes import RequestCode as RC

    names = [f"BenchTopic{i:04d}" for i in range(topics)]
    for name in names:
        call(broker, RC.UPDATE_AND_CREATE_TOPIC, {
            "topic": name, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
            "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
    gnames = [f"bench_group_{i:03d}" for i in range(groups)]
    for i, g in enumerate(gnames):
        call(broker, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
             b'{"groupName":"%s","consumeEnable":true}' % g.encode())
        for qid in range(4):
            call(broker, RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": g, "topic": names[i],
                                                     "queueId": qid, "commitOffset": 0})
    return names, gnames


def send_some(namesrv: str, topics: list[str], per_topic: int) -> None:
    from actors.client import Message, Producer

    with Producer("console_bench_pg", namesrv=namesrv) as p:
        for t in topics:
            for i in range(per_topic):
                p.send(Message(t, b"console bench %d" % i, keys=f"k{i}"))


def time_pages(base_port: int, paths: list[str], runs: int) -> dict[str, list[float]]:
    conn = http.client.HTTPConnection("127.0.0.1", base_port, timeout=120)
    out: dict[str, list[float]] = {}
    try:
        for path in paths:
            conn.request("GET", path)
            first = conn.getresponse()
            body = first.read()
            if first.status != 200 or b'<p class="error">' in body:
                raise RuntimeError(f"{path}: {first.status} {body[:300]!r}")
            took = []
            for _ in range(runs):
                t0 = time.perf_counter()
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                took.append((time.perf_counter() - t0) * 1000)
            out[path] = took
    finally:
        conn.close()
    return out


def report(times: dict[str, list[float]], topics: int, groups: int) -> str:
    lines = [f"console pages, {topics} topics and {groups} groups; ms per page, median (min-max)",
             f"{'page':<44} {'median':>8} {'spread':>17}  goal"]
    for path, took in times.items():
        med = statistics.median(took)
        ok = "met" if med < GOAL_MS else "NOT met"
        lines.append(f"{path:<44} {med:8.1f} {min(took):8.1f}-{max(took):<8.1f}  "
                     f"< {GOAL_MS:.0f} ms: {ok}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="console_bench", description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--groups", type=int, default=200)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--per-topic", type=int, default=5, help="messages sent to each group's topic")
    a = p.parse_args(argv)
    if a.topics < 1 or a.groups < 1 or a.groups > a.topics or a.runs < 1:
        sys.stderr.write("console_bench: --topics >= --groups >= 1, --runs >= 1\n")
        return 2
    logging.basicConfig(level=logging.WARNING)
    from tests.integration.browser import start_console
    from tests.integration.e2e_helpers import start_up_process

    with tempfile.TemporaryDirectory(prefix="amq-console-bench-") as tmp:
        root = Path(tmp)
        run, ns, port, _data = start_up_process(root)
        console = None
        try:
            namesrv, broker = f"127.0.0.1:{ns}", f"127.0.0.1:{port}"
            t0 = time.monotonic()
            topics, groups = populate(broker, a.topics, a.groups)
            send_some(namesrv, topics[: a.groups], a.per_topic)
            sys.stderr.write(f"populated in {time.monotonic() - t0:.1f} s\n")
            console, base = start_console(root, namesrv)
            console_port = int(base.rsplit(":", 1)[1])
            paths = ["/", "/topics", f"/topic/{topics[0]}", "/groups", f"/group/{groups[0]}",
                     f"/messages?topic={topics[0]}&by=time", f"/messages?topic={topics[0]}"
                     "&by=key&key=k1", "/producers", "/acl", "/dlq", "/trace"]
            print(report(time_pages(console_port, paths, a.runs), a.topics, a.groups))
        finally:
            if console is not None:
                console.stop()
            run.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
