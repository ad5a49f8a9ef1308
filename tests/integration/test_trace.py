"""Message trace (issue #24 part 3) as RocketMQ 4.9 writes it, on a broker started as a user
starts it (`actormq up` with traceTopicEnable=true): the real Java 4.9.8 producer with
enableMsgTrace and our PushConsumer with enable_trace on the same message, both records found
by id through `actormq admin queryMsgTraceById`; our Producer's and consumer's records read
by the real mqadmin's queryMsgTraceById (the kit's, QueryMsgTraceByIdSubCommand)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.wire import BlockingClient
from tests.integration.e2e_helpers import (
    consume_until,
    create_topic_cmd,
    start_up_process,
    wait_until,
)

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
TOPIC = "TraceT"


@pytest.fixture
def trace_up(tmp_path: Path) -> Iterator[tuple[int, int]]:
    run, ns, port, _data = start_up_process(tmp_path, traceTopicEnable="true")
    try:
        with BlockingClient(("127.0.0.1", port)) as c:
            assert c.invoke(create_topic_cmd(TOPIC, 4), 10.0).code == 0
        yield ns, port
    finally:
        run.stop()


def _consume(ns: int, group: str, want: set[bytes]) -> None:
    """Our PushConsumer with enable_trace until it has handled `want` (bounded), closed."""
    assert consume_until(f"127.0.0.1:{ns}", group, TOPIC, want, enable_trace=True) == want


def _admin_trace(ns: int, msg_id: str) -> str | None:
    res = subprocess.run([sys.executable, "-m", "deploy", "admin", "queryMsgTraceById", "-n",
                          f"127.0.0.1:{ns}", "-i", msg_id], capture_output=True, timeout=60,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    return res.stdout.decode() if res.returncode == 0 else None


def test_java_producer_trace_and_ours_found_by_id(trace_up: tuple[int, int],
                                                   reference_build: Path,
                                                   tmp_path: Path) -> None:  # fmt: skip
    from deploy.reference import client_classpath

    ns, _port = trace_up
    cp = client_classpath()
    out = tmp_path / "classes"
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out),
                    str(CLIENTS / "TraceProducer.java")], check=True, stdin=subprocess.DEVNULL,
                   capture_output=True, timeout=120)  # fmt: skip
    res = subprocess.run(["java", "-cp", f"{cp}:{out}", "TraceProducer", f"127.0.0.1:{ns}",
                          TOPIC, "java_trace_pg", "jkey-1"], stdin=subprocess.DEVNULL,
                         capture_output=True, timeout=120)  # fmt: skip
    sent = [ln for ln in res.stdout.decode().splitlines() if ln.startswith("SENT ")]
    assert sent and sent[0].endswith("SEND_OK"), res.stderr.decode()[-2000:]
    msg_id = sent[0].split()[1]
    _consume(ns, "py_trace_cg", {b"traced by java"})

    def both() -> str | None:
        text = _admin_trace(ns, msg_id)
        return text if text and "java_trace_pg" in text and "py_trace_cg" in text else None

    text = wait_until(both, 30.0, step_s=0.5)
    assert text is not None, _admin_trace(ns, msg_id)
    from tests.integration.test_console_metrics import _console, _get

    console, base = _console(tmp_path, f"127.0.0.1:{ns}")
    try:
        page = _get(f"{base}/trace?msgId={msg_id}")
        xss = _get(f"{base}/trace?msgId=%3Cscript%3Ealert(1)%3C/script%3E")
    finally:
        console.stop()
    assert page.count("<td>Pub</td><td>java_trace_pg</td>") == 1
    assert "<td>SubAfter</td><td>py_trace_cg</td>" in page and "jkey-1" in page
    assert "<script>alert" not in xss and "&lt;script&gt;alert(1)&lt;/script&gt;" in xss
    lines = text.splitlines()
    pub = [ln for ln in lines if ln.startswith("Pub ")]
    sub = [ln for ln in lines if ln.startswith("Sub ")]
    assert len(pub) == 1 and "java_trace_pg" in pub[0] and "success" in pub[0]
    assert len(sub) == 1 and "py_trace_cg" in sub[0] and "success" in sub[0]


def test_our_trace_read_by_the_java_mqadmin(trace_up: tuple[int, int], reference_build: Path,
                                            tmp_path: Path) -> None:  # fmt: skip
    from actors.client import Message, Producer

    ns, _port = trace_up
    with Producer("py_trace_pg", namesrv=f"127.0.0.1:{ns}", enable_trace=True) as p:
        result = p.send(Message(TOPIC, b"traced by python", keys="pkey-1"))
        async_result = p.send_async(Message(TOPIC, b"async traced")).result(10.0)
    _consume(ns, "py_trace_cg2", {b"traced by python", b"async traced"})
    mqadmin = reference_build / "mqadmin.sh"
    last: dict[str, str] = {}

    def java_view(msg_id: str) -> str | None:
        res = subprocess.run([str(mqadmin), "queryMsgTraceById", "-n", f"127.0.0.1:{ns}", "-i",
                              msg_id], capture_output=True, timeout=120,
                             stdin=subprocess.DEVNULL)  # fmt: skip
        text = res.stdout.decode()
        last[msg_id] = text + res.stderr.decode()[-1500:]
        return text if "py_trace_pg" in text and "py_trace_cg2" in text else None

    for msg_id in (result.msg_id, async_result.msg_id):
        text = wait_until(lambda m=msg_id: java_view(m), 60.0, step_s=1.0)
        assert text is not None, f"mqadmin shows no full trace of {msg_id}: {last.get(msg_id)}"
        pub = [ln for ln in text.splitlines() if ln.startswith("Pub ")]
        sub = [ln for ln in text.splitlines() if ln.startswith("Sub ")]
        assert len(pub) == 1 and "py_trace_pg" in pub[0] and "success" in pub[0]
        assert len(sub) == 1 and "py_trace_cg2" in sub[0] and "success" in sub[0]
