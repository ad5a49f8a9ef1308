"""A PushConsumer in its own process, for tests that kill it (kill -9) or run it beside others.

    python tests/clients/py_consumer.py NAMESRV TOPIC GROUP [SLEEP_MS]

Prints one JSON line per event, flushed at once: {"event": "ready", "client_id": ...} after
start, {"event": "got", "body": ..., "queue": ..., "offset": ...} per message, and
{"event": "assigned", "queues": [...]} whenever its assignment changes. Runs until SIGTERM
(a clean close) or SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from actors.client.consumer import ConsumeResult, PushConsumer

lock = threading.Lock()


def emit(**event: object) -> None:
    with lock:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def main() -> int:
    namesrv, topic, group = sys.argv[1:4]
    sleep_s = (int(sys.argv[4]) if len(sys.argv) > 4 else 0) / 1000.0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def handle(msgs: tuple) -> ConsumeResult:
        if sleep_s:
            time.sleep(sleep_s)
        for m in msgs:
            emit(event="got", body=m.body.decode(), queue=m.queue.queue_id, offset=m.queue_offset)
        return ConsumeResult.SUCCESS

    with PushConsumer(group, namesrv=namesrv, handler=handle, consume_from="first",
                      rebalance_interval_ms=1000.0, rebalance_retry_ms=200.0) as c:
        c.subscribe(topic)
        emit(event="ready", client_id=c.client_id, pid=os.getpid())
        seen: set[int] = set()
        while not stop.wait(0.1):
            now = {q.queue_id for q in c.assignment() if q.topic == topic}
            if now != seen:
                seen = now
                emit(event="assigned", queues=sorted(now))
    emit(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
