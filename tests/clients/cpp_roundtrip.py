"""Drive the RocketMQ C++ client (librocketmq, through its ctypes binding) against a cluster.

Runs inside a client virtualenv made by tests/clients/setup_cpp_clients.sh, never in ours: the
binding packages all call their module `rocketmq`. Prints one JSON object per line on stdout:
one "sent" line per message, one "received" line per consumed message, then "done".

Usage: python cpp_roundtrip.py <namesrv host:port> <topic> <count> <tag expression> <timeout s>
       [orderly | batch | delay]
With `orderly`, messages are sent with send_orderly (message i to queue i % 3) and consumed by an
orderly push consumer, which locks its queues at the broker (LOCK_BATCH_MQ) before consuming.
With `batch`, messages are sent 10 at a time with send_batch (SEND_BATCH_MESSAGE); one "sent"
line per batch, with the first index and the batch size. With `delay`, each message carries
delay level 2 (5 s) and each "received" line has the seconds since it was sent.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import rocketmq.client as rc


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    namesrv, topic, count, expression, timeout_s = sys.argv[1:6]
    orderly = sys.argv[6:7] == ["orderly"]
    batch = sys.argv[6:7] == ["batch"]
    delay = sys.argv[6:7] == ["delay"]
    sent_at: dict[str, float] = {}
    n = int(count)
    producer = rc.Producer("PG_" + topic)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    for start in range(0, n if batch else 0, 10):
        msgs = []
        for i in range(start, min(n, start + 10)):
            msg = rc.Message(topic)
            msg.set_keys(f"key-{i}")
            msg.set_tags(f"Tag{i % 3}")
            msg.set_body(f"body-{i}")
            msgs.append(msg)
        result = producer.send_batch(msgs)
        _emit({"event": "sent", "i": start, "size": len(msgs), "status": int(result.status),
               "msgId": result.msg_id, "queueOffset": result.offset})
    for i in range(0 if batch else n):
        msg = rc.Message(topic)
        msg.set_keys(f"key-{i}")
        msg.set_tags(f"Tag{i % 3}")
        msg.set_body(f"body-{i}")
        if delay:
            msg.set_delay_time_level(2)
        sent_at[f"body-{i}"] = time.monotonic()
        result = producer.send_orderly(msg, i % 3) if orderly else producer.send_sync(msg)
        _emit({"event": "sent", "i": i, "status": int(result.status), "msgId": result.msg_id,
               "queueOffset": result.offset})
    producer.shutdown()

    lock = threading.Lock()
    seen: set[str] = set()

    def on_message(msg: object) -> None:
        body = _text(msg.body)  # type: ignore[attr-defined]
        with lock:
            seen.add(body or "")
        _emit({"event": "received", "body": body, "tags": _text(msg.tags),  # type: ignore[attr-defined]
               "keys": _text(msg.keys), "queueId": msg.queue_id,  # type: ignore[attr-defined]
               "queueOffset": msg.queue_offset, "topic": _text(msg.topic),  # type: ignore[attr-defined]
               "after_s": round(time.monotonic() - sent_at.get(body or "", time.monotonic()), 2)})

    consumer = rc.PushConsumer("CG_" + topic, orderly=orderly)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message, expression)
    consumer.start()
    expected = n if expression == "*" else sum(1 for i in range(n) if f"Tag{i % 3}" == expression)
    deadline = time.monotonic() + float(timeout_s)
    while time.monotonic() < deadline:
        with lock:
            if len(seen) >= expected:
                break
        time.sleep(0.1)
    time.sleep(1.0)  # let a wrongly delivered extra message show up before we stop
    _emit({"event": "done", "expected": expected})
    # Some librocketmq builds crash in PushConsumer shutdown (client-side, seen without any
    # broker involvement), so leave without it: the broker sees the connection close.
    os._exit(0)


if __name__ == "__main__":
    main()
