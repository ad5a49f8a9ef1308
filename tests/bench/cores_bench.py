"""In-process bench of the broker cores over the real store (python -m tests.bench.cores_bench).

Scenarios (each timed --runs times; median and spread printed, in microseconds):
- send1:   SEND_MESSAGE_V2 of one 1 KiB message (per message); send1_core: the same with the
           store's put stubbed (the core's own cost, no response encode); store_put: the same
           message put straight into the store
- batch32: SEND_BATCH_MESSAGE of 32 x 1 KiB (per message)
- pull32:  PULL_MESSAGE of 32 x 1 KiB from a MessageStoreReader (per message and per pull)
- hb:      HEART_BEAT with one consumer group (per request)
- wire_json / wire_rmq / wire_msgpack: what the send actor does per SEND_MESSAGE_V2 frame,
           decode + process + encode of the whole response frame, with the store's put stubbed
           (header in JSON as a Java producer writes it, ROCKETMQ binary, msgpack);
           wire_json_put: the same in JSON with the real store
Other requests are decoded once from real frames; each figure includes encoding the response
header (what the runtime does next), so cheap response headers show up. `--profile NAME`
prints a cProfile of one scenario instead.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import logging
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

from actors.broker.config import BrokerConfig
from actors.broker.context import BrokerContext
from actors.broker.processors.client_manage import ClientManageProcessor
from actors.broker.processors.pull import PullMessageProcessor
from actors.broker.processors.send import SendMessageProcessor
from actors.core import ProcessorCore, Request
from protocol.codes import RequestCode as RC
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.message_batch import BatchItem, encode_batch
from protocol.record import java_string_hash, pack_host
from store.config import StoreConfig
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.message_store import DefaultMessageStore
from store.message_store_reader import MessageStoreReader
from store.put_message_result import PutMessageResult, PutMessageStatus

log = logging.getLogger(__name__)

BODY = b"x" * 1024
PROPS = "UNIQ_KEY\x01C0A8000100002A9F0000000000000001\x02WAIT\x01true\x02TAGS\x01TagA\x02"
PEER = ("127.0.0.1", 40000)


class _NullOutbox:
    def send(self, conn_id: int, cmd: RemotingCommand) -> None:
        """Drop it."""

    def call(self, conn_id: int, cmd: RemotingCommand) -> None:
        """Drop it."""

    def close_conn(self, conn_id: int) -> None:
        """Nothing to close."""


def _frame(cmd: RemotingCommand) -> RemotingCommand:
    """Encode and decode like the wire would (ext values become str, body a memoryview)."""
    return RemotingCommand.decode(cmd.encode()[4:])


def _send_cmd(
    topic: str,
    *,
    batch: bool = False,
    body: bytes = BODY,
    serialize_type: int = SerializeType.ROCKETMQ,
) -> RemotingCommand:
    ext = {
        "a": "PG",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": PROPS,
        "j": "0",
        "k": "false",
        "l": "16",
    }
    if batch:
        ext["m"] = "true"
        ext["i"] = "WAIT\x01true\x02"
    code = RC.SEND_BATCH_MESSAGE if batch else RC.SEND_MESSAGE_V2
    return _frame(RemotingCommand.request(code, ext, body, serialize_type=serialize_type, opaque=1))


def _pull_cmd(topic: str, offset: int) -> RemotingCommand:
    ext = {
        "consumerGroup": "CG",
        "topic": topic,
        "queueId": "0",
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "6",  # suspend + subscription in the request
        "commitOffset": "0",
        "suspendTimeoutMillis": "15000",
        "subscription": "*",
        "subVersion": "0",
        "expressionType": "TAG",
    }
    return _frame(
        RemotingCommand.request(
            RC.PULL_MESSAGE, ext, serialize_type=SerializeType.ROCKETMQ, opaque=2
        )
    )


def _heartbeat_cmd() -> RemotingCommand:
    body = {
        "clientID": "127.0.0.1@1",
        "consumerDataSet": [
            {
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "consumeType": "CONSUME_PASSIVELY",
                "groupName": "CG",
                "messageModel": "CLUSTERING",
                "subscriptionDataSet": [
                    {
                        "classFilterMode": False,
                        "codeSet": [java_string_hash("TagA")],
                        "expressionType": "TAG",
                        "subString": "TagA",
                        "subVersion": 1,
                        "tagsSet": ["TagA"],
                        "topic": "BenchTopic",
                    }
                ],
                "unitMode": False,
            }
        ],
        "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
    }
    return _frame(
        RemotingCommand.request(
            RC.HEART_BEAT, None, json.dumps(body).encode(), serialize_type=SerializeType.JSON
        )
    )


class Bench:
    """One store + send/pull/client_manage cores in a temp dir."""

    def __init__(self, root: str) -> None:
        self.bc = BrokerConfig()
        self.sc = StoreConfig(
            storePathRootDir=root,
            mappedFileSizeCommitLog=256 << 20,
            mappedFileSizeConsumeQueue=300_000 * 20,
            maxIndexNum=2_000_000,
            maxHashSlotNum=500_000,
            messageIndexDispatch="process",  # as the broker runs: the IndexService indexes
        )
        self.store = DefaultMessageStore(self.sc)
        assert self.store.load(0)
        self.store.start(0)
        self.ctx = BrokerContext(
            self.bc, self.sc, group="send", outbox=_NullOutbox(), store=self.store
        )
        self.send = SendMessageProcessor(self.ctx)
        self.reader = MessageStoreReader(self.sc)
        pctx = BrokerContext(
            self.bc, self.sc, group="pull", outbox=_NullOutbox(), store=self.reader
        )
        self.pull = PullMessageProcessor(pctx)
        cctx = BrokerContext(self.bc, self.sc, group="client_manage", outbox=_NullOutbox())
        self.client = ClientManageProcessor(cctx)
        self.now = 1_700_000_000_000

    def close(self) -> None:
        self.reader.close()
        self.store.shutdown(self.now)

    def _time_requests(self, core: ProcessorCore, ctx: BrokerContext, req: Request, n: int
                       ) -> float:
        """Seconds for n x process(req) + encode_header of the response; ctx drained after."""
        proc = core.process
        t0 = time.perf_counter()
        for _ in range(n):
            r = proc(req, self.now)
            r.encode_header()  # type: ignore[union-attr]
        dt = time.perf_counter() - t0
        if ctx.group == "send":
            ctx.drain_arrivals()
        ctx.drain_events()
        return dt

    def run_send1(self, n: int) -> float:
        req = Request(1, PEER, _send_cmd("BenchTopic"), 0)
        return self._time_requests(self.send, self.ctx, req, n) / n * 1e6

    @contextlib.contextmanager
    def _stub_put(self) -> Iterator[None]:
        """Replace the store's put_message by a fixed PUT_OK result."""
        res = PutMessageResult(PutMessageStatus.PUT_OK, 1000, 1200, 5, 0, 1, 2200)
        real = self.store.put_message
        self.store.put_message = lambda msg, now_ms: res
        try:
            yield
        finally:
            self.store.put_message = real

    def run_send1_core(self, n: int) -> float:
        """send1 with put_message stubbed by a fixed result: the core's own cost."""
        with self._stub_put():
            req = Request(1, PEER, _send_cmd("BenchTopic"), 0)
            proc = self.send.process
            t0 = time.perf_counter()
            for _ in range(n):
                proc(req, self.now)
            return (time.perf_counter() - t0) / n * 1e6

    def run_wire(self, n: int, serialize_type: int, stub: bool = True) -> float:
        """Per frame: RemotingCommand.decode + process + encode, as the send actor does."""
        frame = bytes(_send_cmd("BenchTopic", serialize_type=serialize_type).encode()[4:])
        decode = RemotingCommand.decode
        proc = self.send.process
        now = self.now
        with self._stub_put() if stub else contextlib.nullcontext():
            t0 = time.perf_counter()
            for _ in range(n):
                r = proc(Request(1, PEER, decode(frame), 0), now)
                r.encode()  # type: ignore[union-attr]
            dt = time.perf_counter() - t0
        assert r is not None and r.code == 0, r
        self.ctx.drain_arrivals()
        self.ctx.drain_events()
        return dt / n * 1e6

    def run_store_put(self, n: int) -> float:
        host = pack_host(*PEER)
        store_host = pack_host("127.0.0.1", 10911)
        put = self.store.put_message
        t0 = time.perf_counter()
        for _ in range(n):
            props = {
                "UNIQ_KEY": "C0A8000100002A9F0000000000000001",
                "TAGS": "TagA",
                "CLUSTER": "DefaultCluster",
            }
            put(
                MessageExtBrokerInner(
                    "StoreTopic", BODY, 0, props, 0, 0, 1700000000000, host, store_host
                ),
                self.now,
            )
        dt = time.perf_counter() - t0
        self.ctx.drain_arrivals()
        return dt / n * 1e6

    def run_batch32(self, n: int) -> float:
        items = [BatchItem(0, BODY, {"UNIQ_KEY": f"K{i}", "TAGS": "TagA"}) for i in range(32)]
        req = Request(1, PEER, _send_cmd("BenchBatch", batch=True, body=encode_batch(items)), 0)
        return self._time_requests(self.send, self.ctx, req, n) / (n * 32) * 1e6

    def fill_pull(self, total: int) -> None:
        req = Request(1, PEER, _send_cmd("PullTopic"), 0)
        for _ in range(total):
            self.send.process(req, self.now)
        self.ctx.drain_arrivals()
        for ev in self.ctx.drain_events():
            self.pull.ctx.apply(ev, self.now)

    def run_pull32(self, total: int) -> float:
        proc = self.pull.process
        reqs = [Request(1, PEER, _pull_cmd("PullTopic", off), 0) for off in range(0, total, 32)]
        t0 = time.perf_counter()
        got = 0
        for req in reqs:
            r = proc(req, self.now)
            assert r is not None and r.code == 0, r
            r.encode_header()
            got += 32
        dt = time.perf_counter() - t0
        self.pull.ctx.drain_events()
        return dt / got * 1e6

    def run_heartbeat(self, n: int) -> float:
        req = Request(1, PEER, _heartbeat_cmd(), 0)
        return self._time_requests(self.client, self.client.ctx, req, n) / n * 1e6


SCENARIOS: dict[str, tuple[str, Callable[[Bench, int], float]]] = {
    "send1": ("SEND_MESSAGE_V2 1 KiB, us/msg", lambda b, n: b.run_send1(n)),
    "send1_core": (
        "SEND_MESSAGE_V2 core only (store stubbed), us/msg",
        lambda b, n: b.run_send1_core(n),
    ),
    "store_put": ("store.put_message 1 KiB alone, us/msg", lambda b, n: b.run_store_put(n)),
    "batch32": ("SEND_BATCH_MESSAGE 32 x 1 KiB, us/msg", lambda b, n: b.run_batch32(n // 32)),
    "pull32": ("PULL_MESSAGE 32 x 1 KiB, us/msg", lambda b, n: b.run_pull32(n)),
    "hb": ("HEART_BEAT one group, us/request", lambda b, n: b.run_heartbeat(n // 4)),
    "wire_json": (
        "SEND_MESSAGE_V2 JSON decode+process+encode, store stubbed, us/msg",
        lambda b, n: b.run_wire(n, SerializeType.JSON),
    ),
    "wire_rmq": (
        "SEND_MESSAGE_V2 ROCKETMQ decode+process+encode, store stubbed, us/msg",
        lambda b, n: b.run_wire(n, SerializeType.ROCKETMQ),
    ),
    "wire_msgpack": (
        "SEND_MESSAGE_V2 msgpack decode+process+encode, store stubbed, us/msg",
        lambda b, n: b.run_wire(n, SerializeType.MSGPACK),
    ),
    "wire_json_put": (
        "SEND_MESSAGE_V2 JSON decode+process+encode with the store, us/msg",
        lambda b, n: b.run_wire(n, SerializeType.JSON, stub=False),
    ),
}


def _one(name: str, n: int) -> float:
    with tempfile.TemporaryDirectory(prefix="cores-bench-") as d:
        b = Bench(d)
        try:
            if name == "pull32":
                b.fill_pull(n)
            fn = SCENARIOS[name][1]
            fn(b, min(n, 2000))  # warm up (caches, first-touch pages)
            return fn(b, n)
        finally:
            b.close()


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios and print median [min..max] per scenario."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=20000, help="messages per run")
    ap.add_argument("--only", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--profile", choices=list(SCENARIOS))
    args = ap.parse_args(argv)
    out = sys.stdout.write
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        _one(args.profile, args.n)
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        return 0
    for name in args.only:
        vals = [_one(name, args.n) for _ in range(max(1, args.runs))]
        med = statistics.median(vals)
        out(
            f"{name:10s} {med:8.2f} us  [{min(vals):.2f} .. {max(vals):.2f}]  "
            f"{1e6 / med:10,.0f}/s  ({SCENARIOS[name][0]}, {len(vals)} runs)\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
