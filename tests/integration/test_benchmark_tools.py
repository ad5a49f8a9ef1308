"""`actormq producer` / `actormq consumer` against a real cluster: the load tools send and
consume, print their totals, and refuse bad arguments with exit code 2."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator

import pytest

from deploy.benchmark_consumer import main as consumer_main
from deploy.benchmark_producer import main as producer_main
from tests.integration.e2e_helpers import start_real

pytestmark = pytest.mark.integration


@pytest.fixture
def own_signals() -> Iterator[None]:
    """The tools install SIGINT / SIGTERM handlers: put pytest's back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_producer_then_consumer_report_their_totals(
    local_cluster, capsys: pytest.CaptureFixture[str], own_signals: None
) -> None:
    ns = start_real(local_cluster).namesrv_addr()
    code = producer_main(["-n", ns, "-t", "BenchTools", "-w", "2", "--count", "40",
                          "--seconds", "60"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert re.search(r"Total: sent 40 \| failed 0 \|", out), out
    code = consumer_main(["-n", ns, "-t", "BenchTools", "--from", "first", "--count", "40",
                          "--seconds", "60"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    m = re.search(r"Total: consumed (\d+) \| failed 0 \|", out)
    assert m is not None and int(m.group(1)) >= 40, out


@pytest.mark.parametrize("main", [producer_main, consumer_main])
def test_bad_arguments_exit_2(
    main, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert main([]) == 2
    assert "no name server" in capsys.readouterr().err
    assert main(["-n", "no-port"]) == 2
    assert "no-port" in capsys.readouterr().err
    assert main(["-n", "127.0.0.1:9876", "--count", "-1"]) == 2
    assert "--count" in capsys.readouterr().err


def test_producer_refuses_bad_properties(capsys: pytest.CaptureFixture[str]) -> None:
    """--property is checked as every send checks it: exit 2 before anything starts."""
    base = ["-n", "127.0.0.1:1", "--count", "1"]
    for prop, needle in (("TRAN_MSG=true", "The Property<TRAN_MSG> is used by system"),
                         ("MIN_OFFSET=0", "The Property<MIN_OFFSET> is used by system"),
                         ("k= ", "can not be null or blank string"),
                         ("k=a\x02b", "holds \\x01 or \\x02"),
                         ("k", "give NAME=VALUE")):
        assert producer_main([*base, "--property", prop]) == 2, prop
        assert needle in capsys.readouterr().err, prop
