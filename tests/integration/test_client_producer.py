"""Producer, TransactionProducer and AsyncProducer against real brokers (actormq and the
reference RocketMQ 4.9.8): every send mode, batches, ordered sends, compression, delay levels,
the in-flight budget, request-reply, transactions with check-backs, validation, and no process
left behind. What is stored is read back with raw pulls (client_helpers), not the client."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.client import (
    AsyncProducer,
    InflightLimitError,
    LocalTransactionState,
    Message,
    MessageQueue,
    MessageValidationError,
    MQClientError,
    Producer,
    SendStatus,
    TransactionProducer,
)
from actors.client.client_runtime import ClientRuntime
from deploy.wire import BlockingClient
from protocol.message import PROPERTY_TRANSACTION_PREPARED, decode_messages
from tests.integration.client_helpers import (
    TX_FAST,
    Target,
    read_queue,
    start_actormq,
    start_reference,
    stop_actormq,
    system_pids,
    wait_messages,
)
from tests.integration.e2e_helpers import heartbeat_cmd, msg_props, pull_cmd, send_cmd

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(scope="module", params=["actormq", "reference"])
def target(request: Any, tmp_path_factory: Any) -> Iterator[Target]:
    """A cluster for the module: actormq (as `actormq up` starts it) or the reference."""
    base = tmp_path_factory.mktemp(request.param)
    if request.param == "actormq":
        t = start_actormq(base, **TX_FAST)
        yield t
        assert not stop_actormq(t), "broker processes outlived the test"
    else:
        request.getfixturevalue("reference_build")
        t = start_reference(base, **TX_FAST)
        try:
            yield t
        finally:
            t.handle.stop()


# overrides the module fixture's params: these run against actormq only
ACTORMQ_ONLY = pytest.mark.parametrize("target", ["actormq"], indirect=True)


def _topic(target: Target, name: str) -> str:
    return f"{name}_{target.name}"


def test_minimal_shape_send(target: Target) -> None:
    topic = _topic(target, "Orders")
    with Producer("pg", namesrv=target.namesrv) as p:
        r = p.send(Message(topic, b"hello", tags="A", keys="order-1"))
        assert r.status == "SEND_OK" and r.status is SendStatus.SEND_OK
        assert len(r.msg_id) == 32 and r.offset_msg_id and r.queue.topic == topic
        assert r.queue_offset == 0
        with pytest.raises(AttributeError):
            r.status = "X"  # type: ignore[misc]  # frozen
    stored = wait_messages(target, topic, 1)
    assert len(stored) == 1
    m = stored[0]
    assert m.body == b"hello" and m.tags == "A" and m.keys == "order-1"
    assert m.properties["UNIQ_KEY"] == r.msg_id and m.offset_msg_id == r.offset_msg_id


def test_sync_async_oneway_exactly_once(target: Target) -> None:
    topic = _topic(target, "Modes")
    calls: list[tuple[Any, Any]] = []
    done = threading.Event()
    n = 200

    def cb(result: Any, err: Any) -> None:
        calls.append((result, err))
        if len(calls) == n:
            done.set()

    with Producer("pg_modes", namesrv=target.namesrv) as p:
        sync = [p.send(Message(topic, b"s%d" % i)) for i in range(20)]
        futs = [p.send_async(Message(topic, b"a%d" % i), callback=cb) for i in range(n)]
        for i in range(10):
            p.send_oneway(Message(topic, b"o%d" % i))
    # exit flushed: every future is done without waiting here
    assert all(f.done() for f in futs)
    assert done.wait(10) and len(calls) == n
    assert all(err is None and res.status == "SEND_OK" for res, err in calls)
    assert {f.result().msg_id for f in futs} == {res.msg_id for res, _ in calls}
    assert all(r.status == "SEND_OK" for r in sync)
    bodies = sorted(m.body for m in wait_messages(target, topic, 230))
    expected = sorted([b"s%d" % i for i in range(20)] + [b"a%d" % i for i in range(n)]
                      + [b"o%d" % i for i in range(10)])
    assert bodies == expected


def test_async_results_name_their_stored_message(target: Target) -> None:
    """Every async result (auto-batched or not) names the queue, offset and ids its message
    was stored with."""
    topic = _topic(target, "AsyncIds")
    with Producer("pg_ids", namesrv=target.namesrv, max_inflight=400) as p:
        futs = [p.send_async(Message(topic, b"m%d" % i)) for i in range(600)]
        results = [f.result(30) for f in futs]
    stored = {(m.queue_id, m.queue_offset): m for m in wait_messages(target, topic, 600)}
    assert len(stored) == 600
    for i, r in enumerate(results):
        m = stored[(r.queue.queue_id, r.queue_offset)]
        assert (m.body, m.properties["UNIQ_KEY"]) == (b"m%d" % i, r.msg_id)
        assert m.offset_msg_id == r.offset_msg_id


def test_batch_is_one_request_with_consecutive_offsets(target: Target) -> None:
    topic = _topic(target, "Batch")
    with Producer("pg_batch", namesrv=target.namesrv) as p:
        q = p.publish_queues(topic)[1]
        r = p.send_batch([Message(topic, b"b%d" % i, keys=f"k{i}") for i in range(50)], queue=q)
    ids = r.msg_id.split(",")
    assert r.status == "SEND_OK" and len(ids) == 50 and r.queue == q
    stored = read_queue(target.broker_addr(q.broker_name), "batch_cg", topic, q.queue_id)
    assert [m.body for m in stored] == [b"b%d" % i for i in range(50)]
    assert [m.queue_offset for m in stored] == list(range(r.queue_offset, r.queue_offset + 50))
    assert [m.properties["UNIQ_KEY"] for m in stored] == ids


def test_orderly_selector_and_explicit_queue(target: Target) -> None:
    topic = _topic(target, "Ordered")
    with Producer("pg_order", namesrv=target.namesrv) as p:
        qs = p.publish_queues(topic)
        assert len(qs) == 4
        # Java: "hello".hashCode() == 99162322 -> queue 2; "order-7" -> -1207111304 -> 0;
        # "订单-1" -> 1085411543 -> 3 (abs(hashCode % 4), printed by a Java 17 program)
        rs = [p.send_orderly(Message(topic, b"%d" % i), "hello") for i in range(5)]
        assert {r.queue.queue_id for r in rs} == {2}
        assert [r.queue_offset for r in rs] == list(range(rs[0].queue_offset,
                                                          rs[0].queue_offset + 5))
        assert p.send_orderly(Message(topic, b"x"), "order-7").queue.queue_id == 0
        assert p.send_orderly(Message(topic, b"y"), "订单-1").queue.queue_id == 3
        r = p.send(Message(topic, b"q"), queue=MessageQueue(topic, qs[0].broker_name, 1))
        assert r.queue.queue_id == 1
        r = p.send(Message(topic, b"s"), selector=lambda mqs, msg, arg: mqs[arg], arg=0)
        assert r.queue == qs[0]


def test_large_body_compressed_and_delay_level(target: Target) -> None:
    topic = _topic(target, "Big")
    body = bytes(range(256)) * 40  # 10 KiB, compressible
    with Producer("pg_big", namesrv=target.namesrv) as p:
        r = p.send(Message(topic, body), queue=MessageQueue(topic, "broker-a", 0))
        assert r.status == "SEND_OK"
        delayed = p.send(Message(topic, b"later", delay_level=1),
                         queue=MessageQueue(topic, "broker-a", 1))
        assert delayed.status == "SEND_OK"
    addr = target.broker_addr()
    host, port = addr.split(":")
    with BlockingClient((host, int(port))) as c:  # the stored record holds the zlib'd body
        c.invoke(heartbeat_cmd("big@1", "big_cg", {topic: "*"}), 10)
        raw = c.invoke(pull_cmd("big_cg", topic, 0, 0), 10)
    assert raw.code == 0 and len(raw.body) < len(body) // 4
    stored = read_queue(addr, "big_cg", topic, 0)
    assert len(stored) == 1 and stored[0].body == body  # inflated by the record decoder
    # delay level 1 = 1 s: stored again in the topic once due, a second after it was born
    late = [m for m in wait_messages(target, topic, 2, 15.0) if m.body == b"later"]
    assert len(late) == 1 and late[0].store_timestamp - late[0].born_timestamp >= 900


def _pause(target: Target, stop: bool) -> None:
    """SIGSTOP / SIGCONT the broker's processes (answers wait while stopped)."""
    if target.name == "actormq":
        pids = system_pids(target, 0)
    else:
        pids = [target.handle.proc.pid, *_children(target.handle.proc.pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGSTOP if stop else signal.SIGCONT)
        except OSError:
            pass


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out + [c for p in out for c in _children(p)]


@ACTORMQ_ONLY  # pausing the JVMs is not reliable enough for a bounded test
def test_inflight_budget_raises_or_blocks(target: Target) -> None:
    topic = _topic(target, "Budget")
    with Producer("pg_budget", namesrv=target.namesrv, max_inflight=2, on_full="raise") as p, \
            Producer("pg_budget2", namesrv=target.namesrv, max_inflight=1) as blocking:
        p.send(Message(topic, b"warm"))
        blocking.send(Message(topic, b"warm"))
        _pause(target, True)
        try:
            f1 = p.send_async(Message(topic, b"1"))
            f2 = p.send_async(Message(topic, b"2"))
            with pytest.raises(InflightLimitError):
                p.send_async(Message(topic, b"3"))
            blocking.send_async(Message(topic, b"b1"))
            started = threading.Event()
            out: list[Any] = []

            def second() -> None:
                started.set()
                out.append(blocking.send_async(Message(topic, b"b2")))

            th = threading.Thread(target=second)
            th.start()
            assert started.wait(5)
            th.join(0.3)
            assert th.is_alive() and not out  # blocked for room while the broker is paused
        finally:
            _pause(target, False)
        th.join(10)
        assert out and out[0].result(10).status == "SEND_OK"
        assert f1.result(10).status == "SEND_OK" and f2.result(10).status == "SEND_OK"


@ACTORMQ_ONLY  # client-side behaviour: once is enough
def test_a_done_callback_never_waits_for_the_budget(target: Target) -> None:
    """A Future's done-callback runs on the client's I/O thread, the one that reads the answers
    freeing slots of the in-flight budget: a send there with the budget full raises
    InflightLimitError at once (on_full="block" notwithstanding) and flush() refuses to wait.
    Before, both waited for a slot only that thread could free, and the client froze. The
    callback= of send_async runs elsewhere and may block."""
    topic = _topic(target, "Chain")
    with Producer("pg_chain", namesrv=target.namesrv, max_inflight=1) as p:
        p.send(Message(topic, b"warm"))
        seen: list[BaseException] = []
        chained: list[Any] = []

        def on_io_thread(_f: Any) -> None:
            for call in (lambda: p.send_async(Message(topic, b"x")), lambda: p.flush(1.0)):
                try:
                    call()
                except MQClientError as exc:
                    seen.append(exc)

        first = p.send_async(Message(topic, b"first"),
                             callback=lambda r, e: chained.append(
                                 p.send_async(Message(topic, b"second"))))  # fmt: skip
        first.add_done_callback(on_io_thread)
        assert first.result(10).status == "SEND_OK"
        for _ in range(100):  # bounded: both callbacks run right after the answer
            if len(seen) == 2 and chained:
                break
            time.sleep(0.05)
        assert isinstance(seen[0], InflightLimitError) and "I/O thread" in str(seen[1])
        assert chained[0].result(10).status == "SEND_OK"
        assert p.send(Message(topic, b"after")).status == "SEND_OK"


def test_validation_errors() -> None:
    with pytest.raises(MessageValidationError):
        Producer("bad group!", namesrv="127.0.0.1:1")
    with pytest.raises(ValueError, match="name server"):
        Producer("pg", namesrv="")
    # nothing listens on 127.0.0.1:1: validation happens before any request
    with Producer("pg_valid", namesrv="127.0.0.1:1") as p:
        for bad, text in [(Message("bad topic", b"x"), "illegal characters"),
                          (Message("T" * 128, b"x"), "longer than topic max length 127"),
                          (Message("T", b""), "body length is zero"),
                          (Message("T", b"x" * (4 * 1024 * 1024 + 1)), "over max value"),
                          (Message("SCHEDULE_TOPIC_XXXX", b"x"), "forbidden")]:
            with pytest.raises(MessageValidationError, match=text) as info:
                p.send(bad)
            assert isinstance(info.value, ValueError)
            with pytest.raises(MessageValidationError, match=text):
                p.send_async(bad)
        with pytest.raises(MessageValidationError, match="same"):
            p.send_batch([Message("A", b"1"), Message("B", b"2")])
        with pytest.raises(MessageValidationError, match="TimeDelayLevel"):
            p.send_batch([Message("A", b"1", delay_level=2)])
        with pytest.raises(MQClientError, match="route"):
            p.send(Message("NoRoute", b"x"), timeout=1.0)


def _replier(target: Target, topic: str, stop: threading.Event, served: list[str]) -> None:
    """A raw pull loop answering each request with SEND_REPLY_MESSAGE_V2 (as a Java replier's
    MessageUtil.createReplyMessage + producer.send do)."""
    host, port = target.broker_addr().split(":")
    offsets = dict.fromkeys(range(4), 0)
    with BlockingClient((host, int(port))) as c:
        c.invoke(heartbeat_cmd("replier@1", "replier_cg", {topic: "*"}), 10)
        while not stop.is_set():
            for qid in range(4):
                r = c.invoke(pull_cmd("replier_cg", topic, qid, offsets[qid]), 10)
                if r.code != 0:
                    continue
                offsets[qid] = int(r.ext_fields["nextBeginOffset"])
                for m in decode_messages(bytes(r.body)):
                    if "CORRELATION_ID" not in m.properties:
                        continue  # not a request (the message that created the topic)
                    props = msg_props()
                    for k in ("CORRELATION_ID", "REPLY_TO_CLIENT", "TTL"):
                        props[k] = m.properties[k]
                    props["MSG_TYPE"] = "reply"
                    reply_topic = f"{m.properties.get('CLUSTER', 'DefaultCluster')}_REPLY_TOPIC"
                    rr = c.invoke(send_cmd(reply_topic, b"re:" + m.body, props, code=325), 10)
                    assert rr.code == 0, rr.remark
                    served.append(m.properties["CORRELATION_ID"])
            stop.wait(0.02)


def test_request_reply(target: Target) -> None:
    topic = _topic(target, "Req")
    stop, served = threading.Event(), []
    with Producer("pg_req", namesrv=target.namesrv) as p:
        p.send(Message(topic, b"create"))  # the topic exists before the replier reads it
        th = threading.Thread(target=_replier, args=(target, topic, stop, served), daemon=True)
        th.start()
        try:
            replies = [p.request(Message(topic, b"ask%d" % i), timeout=10) for i in range(3)]

            async def ask() -> Any:
                async with AsyncProducer("pg_areq", namesrv=target.namesrv) as ap:
                    return await ap.request(Message(topic, b"async-ask"), timeout=10)

            areply = asyncio.run(ask())
        finally:
            stop.set()
            th.join(15)
    assert [r.body for r in replies] == [b"re:ask0", b"re:ask1", b"re:ask2"]
    assert [r.properties["CORRELATION_ID"] for r in replies] == served[:3]
    assert areply.body == b"re:async-ask"


class _Listener:
    def __init__(self) -> None:
        self.checked: list[str] = []
        self.executed: dict[str, str] = {}  # body -> the transaction id execute_local saw
        self.check_ids: dict[str, str] = {}  # body -> the transaction id check_local got

    def execute_local(self, msg: Any, arg: Any) -> LocalTransactionState:
        self.executed[msg.body.decode()] = msg.transaction_id
        if arg == "boom":
            raise RuntimeError("local transaction failed")
        return LocalTransactionState(arg)

    def check_local(self, msg: Any) -> LocalTransactionState:
        self.checked.append(msg.body.decode())
        self.check_ids[msg.body.decode()] = msg.transaction_id
        return LocalTransactionState.COMMIT_MESSAGE


def test_transactions_commit_rollback_checkback(target: Target) -> None:
    topic = _topic(target, "Tx")
    listener = _Listener()
    with TransactionProducer("pg_tx", namesrv=target.namesrv, listener=listener) as p:
        c = p.send_in_transaction(Message(topic, b"commit"), "COMMIT_MESSAGE")
        r = p.send_in_transaction(Message(topic, b"rollback"), "ROLLBACK_MESSAGE")
        u = p.send_in_transaction(Message(topic, b"unknown"), "UNKNOW")
        e = p.send_in_transaction(Message(topic, b"raised"), "boom")
        assert c.local_state is LocalTransactionState.COMMIT_MESSAGE and c.status == "SEND_OK"
        assert r.local_state is LocalTransactionState.ROLLBACK_MESSAGE
        assert u.local_state is e.local_state is LocalTransactionState.UNKNOW
        # the broker checks the two unknown ones back; check_local commits them
        stored = wait_messages(target, topic, 3, 40.0)
        assert {"raised", "unknown"} <= set(listener.checked)
        # execute_local saw the id check_local gets for the same transaction (Java's
        # msg.getTransactionId()): the key an application records its local transaction under
        assert listener.executed["unknown"] == listener.check_ids["unknown"] == u.msg_id
        assert listener.executed["commit"] == c.msg_id
    assert sorted(m.body for m in stored) == [b"commit", b"raised", b"unknown"]
    assert all(m.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true" for m in stored)


def test_asyncio_twin(target: Target) -> None:
    topic = _topic(target, "Async")

    async def main() -> list[Any]:
        async with AsyncProducer("pg_aio", namesrv=target.namesrv, max_inflight=50) as p:
            first = await p.send(Message(topic, b"first", tags="T"))
            ticks = [0]
            stop = asyncio.Event()

            async def ticker() -> None:
                while not stop.is_set():
                    ticks[0] += 1
                    await asyncio.sleep(0)

            t = asyncio.create_task(ticker())
            futs = [await p.enqueue(Message(topic, b"e%d" % i)) for i in range(300)]
            results = await asyncio.gather(*futs)
            stop.set()
            await t
            assert ticks[0] > 0  # the loop kept running other tasks meanwhile
            batch = await p.send_batch([Message(topic, b"b%d" % i) for i in range(5)])
            orderly = await p.send_orderly(Message(topic, b"o"), "hello")
            await p.send_oneway(Message(topic, b"ow"))
            assert await p.flush(5) == 0
            return [first, *results, batch, orderly]

    out = asyncio.run(main())
    assert all(r.status == "SEND_OK" for r in out)
    assert out[-1].queue.queue_id == 2 and out[-2].msg_id.count(",") == 4
    assert len(wait_messages(target, topic, 1 + 300 + 5 + 1 + 1)) == 308


def test_close_leaves_no_process(target: Target) -> None:
    with Producer("pg_close", namesrv=target.namesrv) as p:
        p.send(Message(_topic(target, "Close"), b"x"))
        runtime = ClientRuntime._instance
        assert runtime is not None
        pgids = set(runtime._pgids)
        assert pgids
    from tests.integration.client_helpers import client_pids_alive

    assert client_pids_alive(pgids) == []
    assert not os.path.exists(runtime.dir)


@ACTORMQ_ONLY  # pausing the JVMs is not reliable enough for a bounded test
def test_asyncio_never_blocks_while_broker_paused(target: Target) -> None:
    topic = _topic(target, "AioPause")

    async def main() -> tuple[int, list[Any]]:
        async with AsyncProducer("pg_aio_pause", namesrv=target.namesrv, max_inflight=2,
                                 send_timeout=20.0) as p:
            await p.send(Message(topic, b"warm"))
            _pause(target, True)
            try:
                f1 = await p.enqueue(Message(topic, b"1"))
                f2 = await p.enqueue(Message(topic, b"2"))
                third = asyncio.create_task(p.enqueue(Message(topic, b"3")))
                ticks = 0
                for _ in range(20):  # the loop runs on while the third waits for room
                    await asyncio.sleep(0.01)
                    ticks += 1
                assert not third.done()
            finally:
                _pause(target, False)
            f3 = await asyncio.wait_for(third, 20)
            return ticks, list(await asyncio.gather(f1, f2, f3))

    ticks, results = asyncio.run(main())
    assert ticks == 20 and all(r.status == "SEND_OK" for r in results)


@ACTORMQ_ONLY  # client-side behaviour: once is enough
def test_asyncio_budget_waiters_are_woken_on_the_loop_thread(target: Target) -> None:
    """Sends waiting for room in the in-flight budget are woken when answers arrive, which
    happens on the client's I/O thread: the budget's asyncio.Semaphore must be released on
    the loop's thread (released from the I/O thread, a waiter could miss its wake-up and
    hang; asyncio's debug mode makes that call raise every time)."""
    topic = _topic(target, "AioRoom")

    async def main() -> list[Any]:
        async with AsyncProducer("pg_aio_room", namesrv=target.namesrv, max_inflight=2) as p:
            sends = [p.send(Message(topic, b"r%d" % i)) for i in range(20)]
            return list(await asyncio.wait_for(asyncio.gather(*sends), 60))

    results = asyncio.run(main(), debug=True)
    assert [r.status for r in results] == ["SEND_OK"] * 20


@ACTORMQ_ONLY  # client-side behaviour: once is enough
def test_orphaned_actor_system_goes_away(tmp_path: Path, target: Target) -> None:
    script = tmp_path / "orphan.py"
    script.write_text(
        "import os, sys, time\n"
        "from actors.client import Producer, Message\n"
        "from actors.client.client_runtime import ClientRuntime\n"
        f"p = Producer('pg_orphan', namesrv='{target.namesrv}').start()\n"
        "p.send(Message('Orphan', b'x'))\n"
        "print(ClientRuntime._instance.dir, flush=True)\n"
        "print(sorted(ClientRuntime._instance._pgids), flush=True)\n"
        "time.sleep(60)\n")
    import subprocess
    import sys

    out = tmp_path / "orphan.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=os.getcwd(),
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while b"]" not in out.read_bytes() and time.monotonic() < deadline:
            assert proc.poll() is None, out.read_text()
            time.sleep(0.1)
        lines = out.read_text().strip().splitlines()
        runtime_dir, pgids = lines[-2], set(eval(lines[-1]))  # the child's own prints
        from tests.integration.client_helpers import client_pids_alive

        assert client_pids_alive(pgids)
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 15
        while client_pids_alive(pgids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = client_pids_alive(pgids)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert left == [], "the client actor system outlived its killed user process"
        assert not os.path.exists(runtime_dir), "the killed process's runtime dir was left"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@ACTORMQ_ONLY  # the CLI is the same client: once is enough
def test_producer_benchmark_cli(tmp_path: Path, target: Target) -> None:
    import subprocess
    import sys

    def run(*args: str) -> tuple[int, str]:
        out = tmp_path / "cli.out"
        with open(out, "wb") as f:
            code = subprocess.run([sys.executable, "-m", "deploy", "producer", *args],
                                  stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=90, check=False).returncode
        return code, out.read_text()

    for mode in ("sync", "async", "batch", "oneway"):
        code, text = run("-n", target.namesrv, "-t", f"CliBench_{mode}", "--mode", mode,
                         "--count", "300", "-w", "2", "-k", "-c", "2", "-s", "64")
        assert code == 0, text
        assert "Total: sent 300 | failed 0" in text, text
    code, text = run("-n", target.namesrv, "--seconds", "1.5", "-w", "1")
    assert code == 0 and "Send TPS:" in text and "Max RT(ms):" in text, text
    code, text = run("-n", target.namesrv, "-w", "0")
    assert code == 2 and "must be >= 1" in text
    assert len(wait_messages(target, "CliBench_batch", 300)) == 300


@ACTORMQ_ONLY  # client-side behaviour: once is enough
def test_closed_producer_refuses_sends(target: Target) -> None:
    p = Producer("pg_closed", namesrv=target.namesrv)
    p.send(Message(_topic(target, "Closed"), b"x"))  # starts on first use
    p.close()
    p.close()  # idempotent
    from actors.client import ClientClosedError

    with pytest.raises(ClientClosedError):
        p.send(Message(_topic(target, "Closed"), b"y"))
    with pytest.raises(ClientClosedError):
        p.send_async(Message(_topic(target, "Closed"), b"y"))


@ACTORMQ_ONLY  # client-side behaviour: once is enough
def test_dead_first_name_server_is_skipped(target: Target) -> None:
    with Producer("pg_two_ns", namesrv=f"127.0.0.1:1;{target.namesrv}") as p:
        assert p.send(Message(_topic(target, "TwoNs"), b"x")).status == "SEND_OK"


@ACTORMQ_ONLY
@pytest.mark.parametrize("auto_batch", [False, True])
def test_async_sends_leave_no_cyclic_garbage(target: Target, auto_batch: bool) -> None:
    """An answered send_async is freed by reference counting, none of it left to the cyclic
    collector (~40 objects per send in cycles made it the producer's largest cost)."""
    topic = _topic(target, f"NoCycles{int(auto_batch)}")
    with Producer("pg_cycles", namesrv=target.namesrv, auto_batch=auto_batch) as p:
        for _ in range(200):  # warm: routes, connections, the accumulator's first batch
            p.send_async(Message(topic, b"w"))
        assert not p.flush(30)
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            futs = [p.send_async(Message(topic, b"x%d" % i)) for i in range(500)]
            assert not p.flush(30)
            assert all(f.result().status == "SEND_OK" for f in futs)
            gc.collect()
            kinds, per_send = sorted({type(o).__name__ for o in gc.garbage}), len(gc.garbage) / 500
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert per_send < 0.5, f"{per_send:.1f} objects of cyclic garbage per send: {kinds}"
