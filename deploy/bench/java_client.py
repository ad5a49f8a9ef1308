"""The Java 4.9.8 client beside ours in `actormq bench --consumer --java` and `--client --java`.

Runs deploy/bench/java/ClientBench.java (compiled once with javac against the reference
RocketMQ 4.9.8 client jars, deploy.reference) in its own JVM: C, a DefaultMQPushConsumer with
a no-op listener over the same stored backlog our PushConsumer consumes, after an untimed
in-JVM warm-up of at least the same seconds ours gets; D, a DefaultMQPushConsumer taking the
latency of the same stamped 500 msgs/s stream our Producer sends; B, a DefaultMQProducer's
async sends with the same in-flight budget as our Producer's send_async. Each JVM writes its JSON
lines to a file (never to our stdout) and is stopped by its PID when it overruns.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent / "java" / "ClientBench.java"
RUN_TIMEOUT_S = 400.0


class JavaBenchError(RuntimeError):
    """The Java side could not be built or did not finish."""


def compiled() -> tuple[str, str]:
    """(client class path, folder of ClientBench.class), compiled on first use into a cache
    folder keyed by the source's hash."""
    from deploy import reference

    cp = reference.client_classpath()
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "actormq"
    out = cache / f"java-bench-{digest}"
    if not (out / "ClientBench.class").is_file():
        out.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(SOURCE)],
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=300,
                             check=False)  # fmt: skip
        if res.returncode != 0:
            raise JavaBenchError(f"javac failed: {res.stderr.decode(errors='replace')[-1500:]}")
    return cp, str(out)


def _java(args: list[str], on_line: Callable[[dict[str, Any]], None] | None = None
          ) -> dict[str, Any]:  # fmt: skip
    """Run ClientBench with args; its JSON lines go to a file; on_line sees each as it comes.
    The last line (a result, or an error raised as JavaBenchError)."""
    cp, classes = compiled()
    with tempfile.NamedTemporaryFile("w+", prefix="amq-javabench-", suffix=".log") as log:
        proc = subprocess.Popen(["java", "-Xms512m", "-Xmx512m", "-cp", f"{classes}:{cp}",
                                 "ClientBench", *args],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        seen = 0
        last: dict[str, Any] = {}
        deadline = time.monotonic() + RUN_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                done = proc.poll() is not None
                with open(log.name) as f:
                    text = f.read()
                whole = text if done else text[: text.rfind("\n") + 1]  # not a line half written
                lines = [ln for ln in whole.splitlines() if ln.startswith("{")]
                for ln in lines[seen:]:
                    try:
                        parsed = json.loads(ln)
                    except ValueError:  # the client's own log lines share the JVM's stdout
                        continue
                    last = parsed
                    if on_line is not None:
                        on_line(last)
                seen = len(lines)
                if done:
                    break
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                proc.kill()  # by its PID
            proc.wait(30)
        if "error" in last or proc.returncode != 0:
            raise JavaBenchError(f"ClientBench {args[0]}: {last or 'no result'} "
                                 f"(exit {proc.returncode})")
        return last


def consume(ns: str, topic: str, total: int, warmup_s: float) -> tuple[float, float]:
    """C on the Java client: (msgs/s, client CPU us/msg)."""
    r = _java(["consume", ns, topic, str(total), str(warmup_s)])
    return float(r["rate"]), float(r["cpu_us"])


def latency(ns: str, topic: str, n: int, start_sender: Callable[[], Any],
            wait_sender: Callable[[Any], None]) -> tuple[float, float]:  # fmt: skip
    """D on the Java client: (p50 ms, p99 ms); the sender starts once the JVM holds the
    topic's queues."""
    sender: list[Any] = []

    def on_line(line: dict[str, Any]) -> None:
        if line.get("event") == "ready" and not sender:
            sender.append(start_sender())

    try:
        r = _java(["latency", ns, topic, str(n)], on_line=on_line)
    finally:
        for s in sender:
            wait_sender(s)
    return float(r["p50_ms"]), float(r["p99_ms"])


def produce(ns: str, topic: str, total: int, inflight: int, warmup_s: float
            ) -> tuple[float, float]:  # fmt: skip
    """B on the Java client, async sends of 1 KiB: (msgs/s, client CPU us/msg)."""
    r = _java(["produce", ns, topic, str(total), str(inflight), str(warmup_s)])
    return float(r["rate"]), float(r["cpu_us"])
