"""A full disk under `actormq up`: sends refused with RocketMQ's code and remark, never a hang or
a spinning actor, pulls served throughout, sends accepted again once space is freed (issue #20).

The store lives on a 64 MiB tmpfs the test mounts (and unmounts) itself, with 8 MiB commit-log
files; a filler file the test writes there takes the space, and deleting it frees the space.
Two ways to a full disk, as the Java broker has them:

- the disk check (CleanCommitLogService.isSpaceFull, every min(cleanResourceInterval, 10 s))
  sees the partition above rocketmq.broker.diskSpaceWarningLevelRatio (0.90) and marks the
  store not writeable: SERVICE_NOT_AVAILABLE (14) with the disk-usage remark;
- with that check out of the way (warning ratio 1.0) the disk fills before anything notices and
  the next commit-log file cannot be created: SYSTEM_ERROR (1), "create mapped file failed,
  server is busy or broken.".

Measured and asserted in both: every send answered (no timeouts), the send actor's CPU while
paced refused sends arrive, one log line per state change (no tracebacks), every acknowledged
message pulled back intact while full and after, no broker process replaced, the time from
freeing the space to the first accepted send.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deploy import procinfo
from deploy.wire import BlockingClient
from protocol.message import decode_messages
from tests.integration.conftest import MarkedProcess
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    assert_store_clean,
    comm,
    create_topic_cmd,
    msg_props,
    pull_cmd,
    send_cmd,
    simple_cmd,
    start_up_process,
    wait_until,
)

pytestmark = pytest.mark.integration

log = logging.getLogger(__name__)

MiB = 1024 * 1024
DISK = 64 * MiB
COMMITLOG_FILE = 8 * MiB
TOPIC = "DiskFullTopic"
GROUP = "disk_full_cg"
QUEUES = 4
BODY = 4096
WINDOW = 16  # sends in flight per round
MAX_SENDS = 40_000
FILL_TIMEOUT_S = 120.0
REFUSED_STREAK = 64  # consecutive refusals that end the fill phase
PACE_S = 0.05  # one refused send per 50 ms while the send actor's CPU is measured
CPU_WINDOW_S = 2.0
MAX_REFUSED_CPU_SHARE = 0.3  # of one core; the issue measured 1.0 (a spinning actor)
RECOVERY_TIMEOUT_S = 30.0
STORE_PROPS = {
    "mappedFileSizeCommitLog": str(COMMITLOG_FILE),
    "mappedFileSizeConsumeQueue": str(6000 * 20),
    "maxHashSlotNum": "4096",
    "maxIndexNum": "16384",
    "cleanResourceInterval": "100",  # the disk check's period here (Java: min(this, 10 s))
    "cleanFileForciblyEnable": "false",  # keep every acknowledged message on the full disk
    "flushConsumerOffsetInterval": "500",
}
SNA_REMARK = re.compile(
    r"service not available now\. It may be caused by one of the following reasons: the "
    r"broker's disk is full \[CL: +-?\d+\.\d\d CQ: +-?\d+\.\d\d INDEX: +-?\d+\.\d\d\], messages"
    r" are put to the slave, message store has been shut down, etc\."
)
CREATE_FAILED_REMARK = "create mapped file failed, server is busy or broken."


@pytest.fixture
def tmpfs(tmpfs_mount: Callable[[int], Path]) -> Path:
    """The broker's store: a 64 MiB tmpfs."""
    return tmpfs_mount(DISK)


def _used(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _fill(path: Path, nbytes: int) -> int:
    """Write a filler file of up to nbytes real bytes (less when the disk fills); its size."""
    chunk = bytes(MiB)
    done = 0
    with open(path, "wb") as f:
        while done < nbytes:
            try:
                done += f.write(chunk[: min(MiB, nbytes - done)])
                f.flush()
            except OSError:
                break
    return os.path.getsize(path)


class Load:
    """Pipelined 4 KiB sends over one connection; what was acknowledged and refused."""

    def __init__(self, port: int) -> None:
        self.cl = BlockingClient(("127.0.0.1", port))
        self.n = 0
        self.acked: dict[str, dict[str, Any]] = {}
        self.codes: collections.Counter[int] = collections.Counter()
        self.remarks: dict[int, set[str]] = collections.defaultdict(set)
        self.timeouts = 0

    def close(self) -> None:
        self.cl.close()

    def round(self, count: int) -> int:
        """Send `count` messages pipelined; how many were refused."""
        window = []
        for _ in range(count):
            body = f"{self.n:08d}".encode() * (BODY // 8)
            props = msg_props(tags="full", keys=f"k{self.n}")
            window.append((send_cmd(TOPIC, body, props, queue_id=self.n % QUEUES), body, props))
            self.n += 1
        self.cl.send_raw(b"".join(req.encode() for req, _, _ in window))
        refused = 0
        for req, body, props in window:
            try:
                resp = self.cl.wait_response(req.opaque, RPC_TIMEOUT_S)
            except TimeoutError:
                self.timeouts += 1
                raise
            self.codes[resp.code] += 1
            if resp.code == 0:
                self.acked[props["UNIQ_KEY"]] = {
                    "body": body, "queueId": int(resp.ext_fields["queueId"]),
                    "queueOffset": int(resp.ext_fields["queueOffset"])}  # fmt: skip
            else:
                refused += 1
                self.remarks[resp.code].add(resp.remark or "")
        return refused

    def until_refused(self) -> None:
        """Send until REFUSED_STREAK refusals in a row (bounded in count and time)."""
        deadline = time.monotonic() + FILL_TIMEOUT_S
        streak = 0
        while streak < REFUSED_STREAK and self.n < MAX_SENDS and time.monotonic() < deadline:
            refused = self.round(WINDOW)
            streak = streak + refused if refused == WINDOW else 0
        assert streak >= REFUSED_STREAK, f"never refused: {self.n} sent, {dict(self.codes)}"

    def first_accepted(self, timeout_s: float) -> float | None:
        """Send one message every 20 ms until one is accepted; seconds it took (None: never)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if self.round(1) == 0:
                return time.monotonic() - start
            time.sleep(0.02)
        return None


def _refused_cpu_share(load: Load, send_pid: int) -> tuple[float, int]:
    """(CPU share of one core the send actor used while paced sends were refused, refusals)."""
    refused = 0
    cpu0 = procinfo.cpu_ns(send_pid)
    t0 = time.monotonic()
    while time.monotonic() - t0 < CPU_WINDOW_S:
        refused += load.round(1)
        time.sleep(PACE_S)
    share = (procinfo.cpu_ns(send_pid) - cpu0) / 1e9 / (time.monotonic() - t0)
    return share, refused


def _pull_all(port: int) -> dict[str, Any]:
    """Every message of every queue of TOPIC by UNIQ_KEY (bounded pulls, CRC checked)."""
    got: dict[str, Any] = {}
    with BlockingClient(("127.0.0.1", port)) as cl:
        for qid in range(QUEUES):
            offset = 0
            for _ in range(MAX_SENDS):
                resp = cl.invoke(pull_cmd(GROUP, TOPIC, qid, offset), RPC_TIMEOUT_S)
                if resp.code != 0:
                    assert resp.code == 19, (qid, offset, resp.code, resp.remark)  # no new msg
                    break
                for m in decode_messages(bytes(resp.body), check_crc=True):
                    got[m.properties["UNIQ_KEY"]] = m
                offset = int(resp.ext_fields["nextBeginOffset"])
    return got


def _assert_all_readable(port: int, acked: dict[str, dict[str, Any]]) -> None:
    got = _pull_all(port)
    missing = [u for u in acked if u not in got]
    assert not missing, f"{len(missing)}/{len(acked)} acknowledged messages not pulled"
    refused = [u for u in got if u not in acked]
    assert not refused, f"{len(refused)} messages stored whose send was refused"
    for uniq, a in acked.items():
        m = got[uniq]
        assert m.body == a["body"], f"torn body {uniq}"
        assert (m.queue_id, m.queue_offset) == (a["queueId"], a["queueOffset"])


def _broker_procs(up: MarkedProcess) -> dict[int, str]:
    return {p: comm(p) for p in up.pids() if comm(p).startswith("amq-")}


def _replaced(up: MarkedProcess, before: dict[int, str]) -> dict[int, str]:
    """The processes of `before` that are gone or renamed (a role that was replaced)."""
    now = _broker_procs(up)
    return {p: name for p, name in before.items() if now.get(p) != name}


def _start(tmp_path: Path, store: Path, **props: str) -> tuple[MarkedProcess, int, Path]:
    up, _ns, port, data = start_up_process(tmp_path, storePathRootDir=str(store),
                                           **STORE_PROPS, **props)  # fmt: skip
    with BlockingClient(("127.0.0.1", port)) as cl:
        assert cl.invoke(create_topic_cmd(TOPIC, QUEUES), RPC_TIMEOUT_S).code == 0
        assert wait_until(lambda: cl.invoke(pull_cmd(GROUP, TOPIC, 0, 0),
                                            RPC_TIMEOUT_S).code != 17, 10.0)  # fmt: skip
    return up, port, data


def _log_since(data: Path, mark: int) -> str:
    return (data / "actormq.log").read_bytes()[mark:].decode("utf-8", "replace")


def _log_size(data: Path) -> int:
    try:
        return (data / "actormq.log").stat().st_size
    except FileNotFoundError:
        return 0


def _refused_quietly(load: Load, send_pid: int, port: int) -> tuple[float, int]:
    """While sends are refused: the send actor stays quiet and every acknowledged message is
    pulled back; (its CPU share, refused sends measured)."""
    share, refused = _refused_cpu_share(load, send_pid)
    assert refused > 0
    assert share < MAX_REFUSED_CPU_SHARE, f"send actor used {share:.0%} of a core"
    _assert_all_readable(port, load.acked)  # pulls served while full
    return share, refused


def _accepted_again(load: Load, up: Any, procs: dict[int, str], port: int,
                    *freed: Path) -> float:
    """Free the space (delete `freed`): sends are accepted again, everything acknowledged reads
    back, no broker process was replaced; seconds until the first accepted send."""
    for path in freed:
        path.unlink()
    recovery_s = load.first_accepted(RECOVERY_TIMEOUT_S)
    assert recovery_s is not None, "sends still refused after the space was freed"
    for _ in range(8):
        assert load.round(WINDOW) == 0
    _assert_all_readable(port, load.acked)
    assert not _replaced(up, procs), "a broker process was replaced"
    return recovery_s


def test_disk_check_refuses_sends_serves_pulls_and_recovers(tmp_path: Path, tmpfs: Path) -> None:
    up, port, data = _start(tmp_path, tmpfs)
    load: Load | None = None
    try:
        procs = _broker_procs(up)
        send_pid = next(p for p, name in procs.items() if name == "amq-send")
        # leave room for one more commit-log file past what the broker made at start: its
        # preallocation (when the writer rolls into the second file) crosses 90 %
        filler = tmpfs / "filler.bin"
        _fill(filler, int(0.82 * DISK) - _used(tmpfs))
        mark = _log_size(data)
        load = Load(port)
        load.until_refused()
        acked_full = len(load.acked)
        assert load.timeouts == 0
        assert set(load.codes) == {0, 14}, dict(load.codes)
        assert all(SNA_REMARK.fullmatch(r) for r in load.remarks[14]), load.remarks[14]

        share, refused = _refused_quietly(load, send_pid, port)
        recovery_s = _accepted_again(load, up, procs, port, filler)

        text = _log_since(data, mark)
        assert "Traceback" not in text, text[-3000:]
        assert len(re.findall(r"so mark disk full", text)) == 1, text[-3000:]
        assert len(re.findall(r"so mark disk ok", text)) == 1, text[-3000:]
        log.warning(
            "disk check: %d acknowledged before refusal, codes %s, send actor %.1f%% of a core "
            "over %d refused sends, first send accepted %.2f s after freeing the space",
            acked_full, dict(load.codes), share * 100, refused, recovery_s,
        )  # fmt: skip
        load.close()
        load = None
        assert up.stop() == 0
        assert_store_clean(tmpfs, **STORE_PROPS)
    finally:
        if load is not None:
            load.close()
        up.stop()


def test_full_disk_refuses_create_mapped_file_failed_and_recovers(
    tmp_path: Path, tmpfs: Path
) -> None:
    # the ratio check out of the way: the disk fills before anything notices
    up, port, data = _start(tmp_path, tmpfs,
                            **{"rocketmq.broker.diskSpaceWarningLevelRatio": "1.0"})
    load: Load | None = None
    try:
        procs = _broker_procs(up)
        send_pid = next(p for p, name in procs.items() if name == "amq-send")
        # room for less than one more commit-log file
        filler = tmpfs / "filler.bin"
        _fill(filler, DISK - _used(tmpfs) - 5 * MiB)
        mark = _log_size(data)
        load = Load(port)
        load.until_refused()
        acked_full = len(load.acked)
        assert load.timeouts == 0
        assert set(load.codes) == {0, 1}, dict(load.codes)
        assert load.remarks[1] == {CREATE_FAILED_REMARK}, load.remarks[1]
        # now nothing at all fits: config files, offsets and stats cannot be written either
        rest = tmpfs / "rest.bin"
        _fill(rest, DISK)
        with BlockingClient(("127.0.0.1", port)) as cl:
            for off in range(1, 4):  # the controller persists consumerOffset.json: ENOSPC
                commit = simple_cmd(15, consumerGroup=GROUP, topic=TOPIC, queueId=0,
                                    commitOffset=off)  # fmt: skip
                assert cl.invoke(commit, RPC_TIMEOUT_S).code == 0
                time.sleep(0.6)

        share, refused = _refused_quietly(load, send_pid, port)
        assert not _replaced(up, procs), "a broker process was replaced while full"
        recovery_s = _accepted_again(load, up, procs, port, rest, filler)
        time.sleep(1.5)  # the periodic writers' next round (0.5 s) finds the space again

        text = _log_since(data, mark)
        assert "Traceback" not in text, text[-3000:]
        assert len(re.findall(r"cannot be created", text)) == 1, text[-3000:]
        failed = re.findall(r"writing (\S+) failed", text)
        assert len(failed) == len(set(failed)), failed  # once per file, not per attempt
        log.warning(
            "ENOSPC: %d acknowledged before refusal, codes %s, send actor %.1f%% of a core over "
            "%d refused sends, first send accepted %.2f s after freeing the space; files that "
            "could not be written meanwhile: %s",
            acked_full, dict(load.codes), share * 100, refused, recovery_s, sorted(set(failed)),
        )  # fmt: skip
        load.close()
        load = None
        assert up.stop() == 0
        assert_store_clean(tmpfs, **STORE_PROPS)
    finally:
        if load is not None:
            load.close()
        up.stop()
