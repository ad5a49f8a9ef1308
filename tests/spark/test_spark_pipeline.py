"""The shipped pipeline end to end: `actormq up`, messages with tags, then
`actormq spark run tag-counts` on local[2] and on a Spark standalone cluster (a master and a
worker started here from pyspark's own scripts on 127.0.0.1, stopped by PID); the Parquet
output and the result topic checked against the counts computed from the topic itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy import launch
from tests.integration.conftest import MarkedProcess
from tests.integration.e2e_helpers import hostile_workdir, wait_until
from tests.spark.spark_helpers import Producer, create_topic, row_dict, wait_routable

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TOPIC = "Clicks"
RUN_TIMEOUT_S = 300.0


class Up:
    """`actormq up` with a SparkBridge on a free port."""

    def __init__(self, base: Path) -> None:
        self.ns_port = launch.stable_free_port()
        self.broker_port = launch.stable_free_port(pair=True)
        self.proc = MarkedProcess(
            [sys.executable, "-m", "deploy", "up", "--data", str(base / "data"),
             "--namesrv-port", str(self.ns_port), "--broker-port", str(self.broker_port),
             "--spark-bridge-port", "0"], base / "up", os.getcwd())  # fmt: skip
        self.ns = f"127.0.0.1:{self.ns_port}"
        self.broker = f"127.0.0.1:{self.broker_port}"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[Up]:
    """`actormq up` holding 300 messages under three tags (and some without)."""
    u = Up(tmp_path_factory.mktemp("up"))
    try:
        u.proc.wait_for("spark bridge listening on", 90.0)
        create_topic(u.broker, TOPIC, 4)
        wait_routable(u.ns, TOPIC, {"broker-a": 4})
        p = Producer("broker-a", u.broker)
        try:
            for i in range(300):
                tag = ["view", "click", "buy", None][i % 4]
                p.send(TOPIC, i % 4, b"x" * (10 + i % 7), tags=tag)
        finally:
            p.close()
        yield u
    finally:
        assert u.proc.stop() == 0


def _expected(spark: Any, up: Up) -> Counter[tuple[int, str | None, str]]:
    """(minute ms, tag) -> messages and bytes, from the topic's own rows."""
    rows = [row_dict(r) for r in spark.read.format("rocketmq").option("nameServer", up.ns)
            .option("topic", TOPIC).load().collect()]  # fmt: skip
    assert len(rows) == 300
    out: Counter[tuple[int, str | None, str]] = Counter()
    for r in rows:
        minute = r["storeTimestamp"] // 60000 * 60000
        out[(minute, r["tags"], "messages")] += 1
        out[(minute, r["tags"], "bytes")] += len(r["body"])
    return out


def _from_parquet(path: Path) -> Counter[tuple[int, str | None, str]]:
    import pyarrow.parquet as pq

    table = pq.read_table(str(path)).to_pylist()
    out: Counter[tuple[int, str | None, str]] = Counter()
    for r in table:
        minute = int(r["minute"].timestamp() * 1000)
        out[(minute, r["tag"], "messages")] += r["messages"]
        out[(minute, r["tag"], "bytes")] += r["bytes"]
    return out


def _run(argv: list[str], base: Path, env: dict[str, str] | None = None,
         cwd: Path | None = None) -> str:
    """`actormq <argv>` as bin/actormq runs it (-P: the working directory off sys.path)."""
    out, err = base.with_suffix(".out"), base.with_suffix(".err")
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-P", "-m", "deploy", *argv], stdout=o,
                                stderr=e, stdin=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ, **(env or {})), cwd=cwd)  # fmt: skip
        try:
            rc = proc.wait(RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(10)
            raise AssertionError(f"{argv} timed out: {err.read_text()[-3000:]}") from None
    assert rc == 0, err.read_text()[-4000:]
    return out.read_text()


def test_tag_counts_local(spark: Any, up: Up, tmp_path: Path) -> None:
    """Run from a folder holding packages named like ours (issue #20, item 5): Spark's Python
    workers, started in that working directory, must import the real ones."""
    want = _expected(spark, up)
    work = hostile_workdir(tmp_path / "work")
    out = _run(["spark", "run", "tag-counts", "-n", up.ns, "-t", TOPIC, "--result-topic",
                "ClickCounts", "--parquet", str(tmp_path / "counts")], tmp_path / "run",
               cwd=work)  # fmt: skip
    groups = len({(m, t) for m, t, _k in want})
    assert f"tag-counts: {groups} (minute, tag) row(s) written" in out
    assert _from_parquet(tmp_path / "counts") == want
    got: Counter[tuple[int, str | None, str]] = Counter()
    for r in spark.read.format("rocketmq").option("nameServer", up.ns) \
            .option("topic", "ClickCounts").load().collect():
        body = json.loads(bytes(r.body))
        assert r.tags == body["tag"] and r.keys == f"{body['minute']}:{body['tag'] or ''}"
        got[(body["minute"], body["tag"], "messages")] += body["messages"]
        got[(body["minute"], body["tag"], "bytes")] += body["bytes"]
    assert got == want


def test_tag_counts_bad_arguments_exit_2(up: Up, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "deploy", "spark", "run", "tag-counts", "-n",
                           up.ns, "-t", TOPIC], capture_output=True, timeout=120, text=True,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 2 and "give --result-topic, --parquet or both" in proc.stderr


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _alive_workers(webui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as r:
            return int(json.loads(r.read()).get("aliveworkers", 0))
    except OSError:
        return 0


def test_tag_counts_on_a_standalone_cluster(spark: Any, up: Up, tmp_path: Path) -> None:
    want = _expected(spark, up)
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOG_DIR": str(tmp_path / "logs")}  # fmt: skip
    port, webui = launch.stable_free_port(), launch.stable_free_port()
    master = MarkedProcess([_spark_class(), "org.apache.spark.deploy.master.Master", "--host",
                            "127.0.0.1", "--port", str(port), "--webui-port", str(webui)],
                           tmp_path / "master", os.getcwd(), env)  # fmt: skip
    worker = None
    try:
        worker = MarkedProcess([_spark_class(), "org.apache.spark.deploy.worker.Worker",
                                "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                "--webui-port", str(launch.stable_free_port()),
                                "--work-dir", str(tmp_path / "work"),
                                f"spark://127.0.0.1:{port}"],
                               tmp_path / "worker", os.getcwd(), env)  # fmt: skip
        assert wait_until(lambda: _alive_workers(webui) == 1, 90.0, 0.5), \
            (tmp_path / "worker.err").read_text()[-3000:]
        out = _run(["spark", "run", "tag-counts", "-n", up.ns, "-t", TOPIC, "--parquet",
                    str(tmp_path / "counts"), "--master", f"spark://127.0.0.1:{port}",
                    "--conf", "spark.driver.host=127.0.0.1",
                    "--conf", "spark.driver.bindAddress=127.0.0.1",
                    "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=1",
                    "--conf", "spark.ui.enabled=false"], tmp_path / "run", env)  # fmt: skip
        assert "(minute, tag) row(s) written" in out
        assert _from_parquet(tmp_path / "counts") == want
        executors = list((tmp_path / "work").glob("app-*/*/stderr"))
        assert executors, "no executor ran on the worker"
    finally:
        if worker is not None:
            worker.stop()
        master.stop()


def test_tag_counts_stream_writes_each_closed_minute_once(spark: Any, up: Up,
                                                          tmp_path: Path) -> None:
    """--stream (here in the test's session): by the producers' clock, two past minutes; the
    watermark (lateness 0) closes the first, which is written once, the second stays open."""
    from deploy.spark.pipelines import TagCountsJob, run_tag_counts

    topic = "ClicksByBorn"
    create_topic(up.broker, topic, 2)
    wait_routable(up.ns, topic, {"broker-a": 2})
    m1 = (int(time.time() * 1000) // 60000 - 10) * 60000  # ten minutes ago, on the minute
    p = Producer("broker-a", up.broker)
    try:
        for i in range(30):
            minute = m1 if i < 20 else m1 + 60000
            p.send(topic, i % 2, b"y" * (i + 1), tags=["a", "b"][i % 2], born_ms=minute + i)
    finally:
        p.close()
    job = TagCountsJob(name_server=up.ns, topic=topic, result_topic=None,
                       parquet=str(tmp_path / "counts"), stream=True,
                       checkpoint=str(tmp_path / "ck"), lateness="0 seconds",
                       time_column="bornTimestamp")  # fmt: skip
    for _ in range(2):  # a second run from the checkpoint finds nothing new to close
        assert run_tag_counts(spark, job) == 0
    want: Counter[tuple[int, str | None, str]] = Counter()
    for i in range(20):
        want[(m1, ["a", "b"][i % 2], "messages")] += 1
        want[(m1, ["a", "b"][i % 2], "bytes")] += i + 1
    assert _from_parquet(tmp_path / "counts") == want
