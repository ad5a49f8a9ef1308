"""Drive the RocketMQ C++ client 2.1.0's transaction producer (librocketmq) against a cluster.

Runs inside tests/clients/.venv-cpp2 (made by setup_cpp_clients.sh), never in ours. The Python
binding of that build has no transaction producer class, so this calls the library's own C API
(CreateTransactionProducer / SendMessageTransaction) through ctypes; the client core, and every
frame it sends or parses, is the unmodified librocketmq.

For i in range(count), three messages: "commit-i" (the local transaction answers COMMIT),
"rollback-i" (ROLLBACK) and "unknown-i" (UNKNOWN; the broker's check-back asks the checker,
which answers COMMIT). Then a push consumer reads the topic. One JSON object per line on stdout:
"sent", "checked", "received", then "done".

Usage: python cpp_transaction.py <namesrv host:port> <topic> <count> <timeout s>
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import time
from ctypes import POINTER, c_int, c_void_p

import rocketmq.client as rc
from rocketmq.ffi import _CSendResult, dll

COMMIT, ROLLBACK, UNKNOWN = 0, 1, 2  # CTransactionStatus
CHECKER = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
EXECUTOR = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
dll.CreateTransactionProducer.argtypes = [ctypes.c_char_p, CHECKER, c_void_p]
dll.CreateTransactionProducer.restype = c_void_p
dll.SendMessageTransaction.argtypes = [c_void_p, c_void_p, EXECUTOR, c_void_p,
                                       POINTER(_CSendResult)]
dll.SendMessageTransaction.restype = c_int
dll.GetOriginMessageBody.argtypes = [c_void_p]
dll.GetOriginMessageBody.restype = ctypes.c_char_p

_out = threading.Lock()


def _emit(obj: dict) -> None:
    with _out:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def _text(raw: bytes | None) -> str:
    return raw.decode() if raw else ""


def main() -> None:
    namesrv, topic, count, timeout_s = sys.argv[1:5]
    n = int(count)
    deadline = time.monotonic() + float(timeout_s)
    checked: set[str] = set()
    lock = threading.Lock()

    def on_check(_producer: int, msg_ext: int, _data: int) -> int:
        body = _text(dll.GetMessageBody(msg_ext))
        _emit({"event": "checked", "body": body, "topic": _text(dll.GetMessageTopic(msg_ext)),
               "checkTimes": _text(dll.GetMessageProperty(msg_ext, b"TRANSACTION_CHECK_TIMES"))})
        with lock:
            checked.add(body)
        return COMMIT

    def on_execute(_producer: int, msg: int, _data: int) -> int:
        body = _text(dll.GetOriginMessageBody(msg))
        return {"commit": COMMIT, "rollback": ROLLBACK}.get(body.split("-")[0], UNKNOWN)

    checker = CHECKER(on_check)
    executor = EXECUTOR(on_execute)
    producer = dll.CreateTransactionProducer(f"TXPG_{topic}".encode(), checker, None)
    dll.SetProducerNameServerAddress(producer, namesrv.encode())
    if dll.StartProducer(producer) != 0:
        _emit({"event": "error", "what": "StartProducer"})
        sys.exit(3)
    for i in range(n):
        for kind in ("commit", "rollback", "unknown"):
            msg = dll.CreateMessage(topic.encode())
            dll.SetMessageKeys(msg, f"{kind}-key-{i}".encode())
            dll.SetMessageBody(msg, f"{kind}-{i}".encode())
            res = _CSendResult()
            rc_ = dll.SendMessageTransaction(producer, msg, executor, None, ctypes.pointer(res))
            _emit({"event": "sent", "body": f"{kind}-{i}", "rc": rc_,
                   "status": res.sendStatus, "msgId": _text(res.msgId)})
            dll.DestroyMessage(msg)
    want = {f"unknown-{i}" for i in range(n)}
    while time.monotonic() < deadline:
        with lock:
            if want <= checked:
                break
        time.sleep(0.1)
    dll.ShutdownProducer(producer)
    dll.DestroyProducer(producer)

    seen: set[str] = set()

    def on_message(msg: object) -> None:
        body = _text(msg.body)  # type: ignore[attr-defined]
        with lock:
            seen.add(body)
        _emit({"event": "received", "body": body, "keys": _text(msg.keys)})  # type: ignore[attr-defined]

    consumer = rc.PushConsumer(f"TXCG_{topic}")
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message)
    consumer.start()
    expected = {f"commit-{i}" for i in range(n)} | want
    settle_until = None
    while time.monotonic() < deadline:
        with lock:
            done = expected <= seen
        if done and settle_until is None:
            settle_until = time.monotonic() + 2.0  # a rolled-back message must not show up
        if settle_until is not None and time.monotonic() >= settle_until:
            break
        time.sleep(0.1)
    _emit({"event": "done"})
    sys.stdout.flush()
    os._exit(0)  # as cpp_roundtrip.py: the 2.1.0 core can crash in its own consumer shutdown


if __name__ == "__main__":
    main()
