"""Start and stop the reference Apache RocketMQ 4.9.8 (name server + broker) beside actormq.

Mirrors nothing in RocketMQ: it drives the unmodified 4.9.8 build kept outside this repository
(`shared/reference/rocketmq-4.9.8`: build.sh, rocketmq_up.sh, classpath.sh) so benchmarks and
tests can run the same scenario against both brokers in one invocation. Nothing of it is copied
here; the folder is located at run time (ACTORMQ_REFERENCE_DIR, or `../shared/reference/...`
next to the checkout, or /work/shared/reference/...).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

REFERENCE_ENV = "ACTORMQ_REFERENCE_DIR"
REFERENCE_NAME = "rocketmq-4.9.8"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0


class ReferenceUnavailable(RuntimeError):
    """The reference RocketMQ build cannot be found or built on this machine."""


def reference_dir() -> Path:
    """The folder holding the reference's scripts (build.sh, rocketmq_up.sh, classpath.sh)."""
    repo = Path(__file__).resolve().parent.parent
    candidates = [os.environ.get(REFERENCE_ENV, "")]
    candidates += [str(repo.parent / "shared" / "reference" / REFERENCE_NAME),
                   f"/work/shared/reference/{REFERENCE_NAME}"]  # fmt: skip
    for c in candidates:
        if c and (Path(c) / "rocketmq_up.sh").is_file():
            return Path(c)
    raise ReferenceUnavailable(
        f"the reference RocketMQ 4.9.8 is not found (set {REFERENCE_ENV} to its folder)")


def build(timeout_s: float = 900.0) -> Path:
    """Run the reference's build.sh (idempotent, ~0.5 s once built); return its folder."""
    here = reference_dir()
    res = subprocess.run([str(here / "build.sh")], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s,
                         check=False)  # fmt: skip
    if res.returncode != 0:
        tail = res.stdout.decode(errors="replace")[-2000:]
        raise ReferenceUnavailable(f"reference build.sh failed ({res.returncode}): {tail}")
    return here


def client_classpath() -> str:
    """The Java client's class path (rocketmq-client, tools, fastjson, ...): one line."""
    here = build()
    res = subprocess.run([str(here / "classpath.sh")], stdin=subprocess.DEVNULL,
                         capture_output=True, timeout=120, check=True)  # fmt: skip
    return res.stdout.decode().strip()


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _free_port_triple() -> int:
    """A broker port BP with BP - 2 and BP + 1 free too (RocketMQ opens all three)."""
    from deploy.launch import port_is_free, stable_free_port

    for _ in range(200):
        bp = stable_free_port()
        if port_is_free(bp - 2) and port_is_free(bp + 1):
            return bp
    raise ReferenceUnavailable("no free port triple for the reference broker")


@dataclass
class ReferenceCluster:
    """A running reference name server + broker (one launcher process, stopped by PID)."""

    store_dir: str
    namesrv_port: int
    broker_port: int
    proc: subprocess.Popen[bytes] | None = None
    extra_conf: dict[str, str] = field(default_factory=dict)

    def namesrv_addr(self) -> str:
        """host:port of the reference name server."""
        return f"127.0.0.1:{self.namesrv_port}"

    def broker_addr(self) -> str:
        """host:port of the reference broker."""
        return f"127.0.0.1:{self.broker_port}"

    def pid(self) -> int | None:
        """The launcher's PID (its children are the two JVMs)."""
        return self.proc.pid if self.proc is not None else None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ReferenceCluster:
        """Start both JVMs and wait until the broker is registered with the name server."""
        self.launch()
        return self.wait_ready(timeout_s)

    def launch(self) -> ReferenceCluster:
        """Build if needed and spawn the launcher without waiting (call from the main thread)."""
        here = build()
        os.makedirs(self.store_dir, exist_ok=True)
        args = [str(here / "rocketmq_up.sh"), "--namesrv-port", str(self.namesrv_port),
                "--broker-port", str(self.broker_port), "--store", self.store_dir]  # fmt: skip
        if self.extra_conf:
            conf = os.path.join(self.store_dir, "extra.conf")
            with open(conf, "w", encoding="utf-8") as f:
                f.writelines(f"{k}={v}\n" for k, v in self.extra_conf.items())
            args += ["--conf", conf]
        out = open(os.path.join(self.store_dir, "launcher.out"), "wb")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)  # fmt: skip
        finally:
            out.close()
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> ReferenceCluster:
        """Wait until the launched broker is registered with the name server; stop it if not."""
        if self.proc is None:
            raise ReferenceUnavailable("the reference was not launched")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ReferenceUnavailable(
                    f"reference launcher exited {self.proc.returncode}; see {self.store_dir}/logs")
            if _port_open(self.broker_port) and self._registered():
                log.info("reference RocketMQ up: namesrv %s broker %s", self.namesrv_addr(),
                         self.broker_addr())
                return self
            time.sleep(0.25)
        self.stop()
        raise ReferenceUnavailable(f"reference RocketMQ did not start within {timeout_s:.0f} s")

    def _registered(self) -> bool:
        """True once the name server lists the broker (GET_BROKER_CLUSTER_INFO)."""
        from deploy.wire import BlockingClient
        from protocol.codes import RequestCode, ResponseCode
        from protocol.command import RemotingCommand

        try:
            with BlockingClient(self.namesrv_addr()) as c:
                resp = c.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 2.0)
        except OSError:
            return False
        return resp.code == ResponseCode.SUCCESS and str(self.broker_port).encode() in bytes(
            resp.body)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM the launcher (it stops both JVMs), SIGKILL its session after timeout_s."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            log.warning("reference launcher %d did not stop: killing its session", proc.pid)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(timeout=10)

    def __enter__(self) -> ReferenceCluster:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def reference_cluster(store_dir: str, extra_conf: dict[str, str] | None = None) -> ReferenceCluster:
    """A ReferenceCluster on free ports (not started: use `with` or `.start()`)."""
    from deploy.launch import stable_free_port

    ns = stable_free_port()
    bp = _free_port_triple()
    return ReferenceCluster(store_dir, ns, bp, extra_conf=dict(extra_conf or {}))
