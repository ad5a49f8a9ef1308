"""Integration fixtures: a one-host cluster started exactly as `actormq up` starts it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy import launch, procinfo
from deploy.launch import cluster_pids
from tests.support.echo_broker import ECHO_BROKER, SLOW_ECHO_BROKER

ECHO = ECHO_BROKER  # the echo broker's controller actor (tests.support.echo_broker)
SLOW_ECHO = SLOW_ECHO_BROKER  # the same, its send group slow (fast failure)
REAL = launch.BROKER_CONTROLLER  # the real broker


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait (bounded) until none of `pids` lives; return the survivors."""
    deadline = time.monotonic() + timeout_s
    alive = [p for p in pids if not procinfo.is_zombie(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if not procinfo.is_zombie(p)]
    return alive


def kill_pids(pids: list[int]) -> None:
    """SIGKILL by PID (last resort in teardown)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def local_cluster(tmp_path: Any) -> Iterator[Callable[..., launch.LocalCluster]]:
    """Factory: start name server + broker like `actormq up`; everything stopped by PID after."""
    from actors.broker.config import BrokerConfig
    from store.config import StoreConfig

    started: list[tuple[launch.LocalCluster, list[int]]] = []

    def start(
        broker: str = ECHO,
        broker_props: dict[str, str] | None = None,
        *,
        namesrv: bool = True,
        idle_s: float = 120.0,
        max_frame: int = 16 * 1024 * 1024,
    ) -> launch.LocalCluster:
        data = str(tmp_path / f"data{len(started)}")
        cluster = launch.start_system(data)
        started.append((cluster, []))
        try:
            props = {"listenPort": "0", "storePathRootDir": os.path.join(data, "store")}
            if namesrv:
                port = launch.start_namesrv(cluster, port=0, idle_s=idle_s)
                props["namesrvAddr"] = f"127.0.0.1:{port}"
            props.update(broker_props or {})
            bc = BrokerConfig.from_properties(props)
            sc = StoreConfig.from_properties(props)
            launch.start_broker(cluster, bc, sc, idle_s=idle_s, max_frame=max_frame,
                                actor_class=broker)
        finally:
            started[-1] = (cluster, cluster_pids(cluster))
        return cluster

    yield start

    survivors: list[int] = []
    for cluster, pids in started:
        pids = sorted(set(pids) | set(cluster_pids(cluster)))
        try:
            launch.stop_cluster(cluster)
        finally:
            left = wait_gone(pids, 15.0)
            kill_pids(left)
            survivors.extend(left)
    assert not survivors, f"actor processes outlived the cluster: {survivors}"


class MarkedProcess:
    """A command run as a subprocess with its output in files, every process it starts
    (launcher, Thespian admin, actors) found again by an env marker; stopped by PID."""

    def __init__(self, argv: list[str], out_base: Path, cwd: str,
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        self.marker = uuid.uuid4().hex
        self.out_path = out_base.with_suffix(".out")
        self.err_path = out_base.with_suffix(".err")
        full_env = dict(os.environ, ACTORMQ_TEST_MARKER=self.marker, **(env or {}))
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         env=full_env, cwd=cwd, start_new_session=True)  # fmt: skip

    def wait_for(self, text: str, timeout_s: float = 60.0) -> None:
        """Until `text` is in the output (bounded); fails early when the command exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.out_path.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never printed: {self.err_path.read_text()[-3000:]}")

    def pids(self) -> list[int]:
        """Every live process started for this run."""
        return procinfo.pids_with_env(f"ACTORMQ_TEST_MARKER={self.marker}")

    def kill9(self) -> list[int]:
        """SIGKILL every process of the run at once; the PIDs killed."""
        pids = self.pids()
        kill_pids(pids)
        return pids

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM the launcher (clean shutdown), wait bounded, SIGKILL what is left; its exit
        code (None when it had to be killed)."""
        pids = sorted(set(self.pids()) | {self.proc.pid})
        code: int | None = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        kill_pids(wait_gone(pids, 15.0))
        return code


def up_command(echo: bool) -> list[str]:
    """`actormq up` as a command: the package's (`python -m deploy up`), or with the echo
    broker in place of the real one (`python -m tests.support.echo_up up`)."""
    return [sys.executable, "-m", "tests.support.echo_up" if echo else "deploy", "up"]


class UpProcess(MarkedProcess):
    """`actormq up` on free ports (ns_port, broker_port): the echo broker's, or the real one."""

    def __init__(self, tmp_path: Path, host: str, echo: bool) -> None:
        self.ns_port = launch.stable_free_port()
        self.broker_port = launch.stable_free_port(pair=True)
        cmd = [*up_command(echo), "--data", str(tmp_path / "data"),
               "--namesrv-port", str(self.ns_port), "--broker-port", str(self.broker_port),
               "--host", host, "--spark-bridge-port", "0", "--console-port", "0"]  # fmt: skip
        super().__init__(cmd, tmp_path / "up", os.getcwd())

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until the broker line is printed (bounded)."""
        self.wait_for("broker ", timeout_s)


@pytest.fixture
def up_process(tmp_path: Any) -> Iterator[Callable[..., UpProcess]]:
    """Factory for `actormq up` subprocesses; every process is stopped by PID afterwards."""
    made: list[UpProcess] = []

    def start(host: str = "127.0.0.1", echo: bool = True) -> UpProcess:
        up = UpProcess(Path(tmp_path), host, echo)
        made.append(up)
        return up

    yield start
    for up in made:
        up.stop()


@pytest.fixture
def tmpfs_mount(tmp_path: Any) -> Iterator[Callable[[int], Path]]:
    """Factory: mount a tmpfs of `size` bytes (a small disk that fills) under tmp_path; each is
    unmounted after the test (lazily when something still holds it). Needs root."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        mnt = Path(tmp_path) / f"tmpfs{len(mounted)}"
        mnt.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                       check=True, timeout=30)  # fmt: skip
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in mounted:
        if subprocess.run(["umount", str(mnt)], timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], timeout=30, check=True)
