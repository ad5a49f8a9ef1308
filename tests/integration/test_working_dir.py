"""The working directory never replaces our code (issue #20, item 5).

Folders named like our packages where a user stands (a store root called `store`, a project's
own `deploy/` or `tests/`) must not be imported by `actormq up` or by the actors it forks
(tests/spark/test_spark_pipeline.py checks Spark's Python workers the same way)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy import launch
from deploy.wire import BlockingClient
from tests.integration.conftest import MarkedProcess
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    create_topic_cmd,
    hostile_workdir,
    msg_props,
    pull_cmd,
    send_cmd,
)

pytestmark = pytest.mark.integration

ACTORMQ = str(Path(__file__).resolve().parents[2] / "bin" / "actormq")


def test_up_in_a_folder_named_like_our_packages(tmp_path: Path) -> None:
    work = hostile_workdir(tmp_path / "work")
    ns = launch.stable_free_port()
    broker = launch.stable_free_port(pair=True, avoid={ns, ns - 1})  # HA: broker + 1
    run = MarkedProcess([ACTORMQ, "up", "--namesrv-port", str(ns), "--broker-port", str(broker),
                         "--spark-bridge-port", "0"], tmp_path / "up", str(work))  # fmt: skip
    try:
        run.wait_for(f"listening on 127.0.0.1:{broker} (", 90.0)
        with BlockingClient(("127.0.0.1", broker)) as c:
            assert c.invoke(create_topic_cmd("WorkDirT", 1), RPC_TIMEOUT_S).code == 0
            r = c.invoke(send_cmd("WorkDirT", b"here", msg_props(tags="a")), RPC_TIMEOUT_S)
            assert r.code == 0, r.remark
            got = c.invoke(pull_cmd("wd_cg", "WorkDirT", 0, 0), RPC_TIMEOUT_S)
            assert got.code == 0 and b"here" in bytes(got.body)
    finally:
        code = run.stop()
    assert code == 0, run.err_path.read_text()[-3000:]
    assert (work / "data" / "store" / "commitlog").is_dir()  # ./data where the user stands
    assert "working directory" not in (work / "data" / "actormq.log").read_text()
