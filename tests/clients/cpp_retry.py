"""Drive librocketmq 2.1.0's push consumer through a failed delivery and its retry.

Runs in tests/clients/.venv-cpp2 (setup_cpp_clients.sh). The binding's own callback wrapper
cannot ask for a later redelivery (an exception it re-raises ends as CONSUME_SUCCESS), so the
consumer callback is registered through the library's C API and returns RECONSUME_LATER for the
first delivery of each message: the client sends it back (CONSUMER_SEND_MSG_BACK), the broker
parks it at delay level 3 (10 s) and delivers it again from %RETRY%<group>. One JSON object per
line: "sent", "delivery" (body, reconsumeTimes, seconds since the first delivery), "done".

Usage: python cpp_retry.py <namesrv host:port> <topic> <count> <timeout s>
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import rocketmq.client as rc
from rocketmq.ffi import MSG_CALLBACK_FUNC, dll

CONSUME_SUCCESS, RECONSUME_LATER = 0, 1
_lock = threading.Lock()


def _emit(obj: dict) -> None:
    with _lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def main() -> None:
    namesrv, topic, count, timeout_s = sys.argv[1:5]
    n = int(count)
    producer = rc.Producer(f"PG_{topic}")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    for i in range(n):
        msg = rc.Message(topic)
        msg.set_keys(f"retry-key-{i}")
        msg.set_tags("TagR")
        msg.set_body(f"retry-{i}")
        r = producer.send_sync(msg)
        _emit({"event": "sent", "i": i, "status": int(r.status)})
    producer.shutdown()

    first: dict[str, float] = {}
    finished: set[str] = set()

    def on_message(_consumer: int, msg_ext: int) -> int:
        body = (dll.GetMessageBody(msg_ext) or b"").decode()
        times = int(dll.GetMessageReconsumeTimes(msg_ext))
        now = time.monotonic()
        with _lock:
            t0 = first.setdefault(body, now)
        _emit({"event": "delivery", "body": body, "reconsumeTimes": times,
               "topic": (dll.GetMessageTopic(msg_ext) or b"").decode(),
               "after_s": round(now - t0, 2)})
        if times == 0:
            return RECONSUME_LATER
        with _lock:
            finished.add(body)
        return CONSUME_SUCCESS

    callback = MSG_CALLBACK_FUNC(on_message)
    consumer = dll.CreatePushConsumer(f"CG_{topic}".encode())
    dll.SetPushConsumerNameServerAddress(consumer, namesrv.encode())
    dll.Subscribe(consumer, topic.encode(), b"*")
    dll.RegisterMessageCallback(consumer, callback)
    if dll.StartPushConsumer(consumer) != 0:
        _emit({"event": "error", "what": "StartPushConsumer"})
        os._exit(3)
    deadline = time.monotonic() + float(timeout_s)
    while time.monotonic() < deadline:
        with _lock:
            if len(finished) >= n:
                break
        time.sleep(0.1)
    time.sleep(1.0)  # an extra delivery would show up here
    _emit({"event": "done"})
    os._exit(0)  # as cpp_roundtrip.py: the 2.1.0 core can crash in its own consumer shutdown


if __name__ == "__main__":
    main()
