"""Drive librocketmq 2.1.0's producer and push consumer with session credentials (ACL).

Runs in tests/clients/.venv-cpp2 (setup_cpp_clients.sh). The C++ core's ClientRPCHook signs
every request with the access key, the channel (OnsChannel) and an HMAC-SHA1 signature over
the sorted fields and the body, as Java's AclClientRPCHook does. One JSON object per line:
"sent" (status) or "refused" (the error text) per message, "received" per consumed body (when
every send went through), then "done".

Usage: python cpp_acl.py <namesrv host:port> <topic> <count> <accessKey> <secretKey> <timeout s>
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import rocketmq.client as rc

CHANNEL = "ALIYUN"  # SessionCredentials' default channel in the Java and C++ clients


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    namesrv, topic, count, ak, sk, timeout_s = sys.argv[1:7]
    n = int(count)
    producer = rc.Producer(f"PG_ACL_{topic}")
    producer.set_namesrv_addr(namesrv)
    producer.set_session_credentials(ak, sk, CHANNEL)
    producer.set_timeout(5000)
    producer.start()
    ok = 0
    for i in range(n):
        msg = rc.Message(topic)
        msg.set_tags("TagA")
        msg.set_body(f"cpp-acl-{i}")
        try:
            result = producer.send_sync(msg)
        except Exception as exc:  # the binding raises on a refused send
            _emit({"event": "refused", "i": i, "error": str(exc)[:500]})
            continue
        ok += int(result.status) == 0
        _emit({"event": "sent", "i": i, "status": int(result.status)})
    producer.shutdown()
    if ok == n:
        lock = threading.Lock()
        seen: set[str] = set()

        def on_message(msg: object) -> None:
            body = msg.body  # type: ignore[attr-defined]
            text = body.decode() if isinstance(body, bytes) else str(body)
            with lock:
                seen.add(text)
            _emit({"event": "received", "body": text})

        consumer = rc.PushConsumer(f"CG_ACL_{topic}")
        consumer.set_namesrv_addr(namesrv)
        consumer.set_session_credentials(ak, sk, CHANNEL)
        consumer.subscribe(topic, on_message, "*")
        consumer.start()
        deadline = time.monotonic() + float(timeout_s)
        while time.monotonic() < deadline:
            with lock:
                if len(seen) >= n:
                    break
            time.sleep(0.1)
    _emit({"event": "done"})
    os._exit(0)  # as cpp_roundtrip.py: some librocketmq builds crash in consumer shutdown


if __name__ == "__main__":
    main()
