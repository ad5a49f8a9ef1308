"""Start and stop actormq actor systems: name server and brokers on one host.

Mirrors namesrv/NamesrvStartup.java and broker/BrokerStartup.java, RocketMQ 4.9.x: build the
configs, start the roles, install a shutdown hook. Here a role is a Thespian actor in a
multiprocTCPBase actor system whose admin gets a free Admin Port and whose own log goes to a
file (THESPLOG_FILE).

Loopback binding (security): Thespian's actor and admin ports accept unauthenticated pickles,
and its TCP transport binds '' (every interface) for addresses marked external
(thespian/system/transport/IPBase.py, IPActorAddress.__init__: `bindname = ('', port) if
external else sockname`, used by TCPTransport.__init__ via `addressDetails.bindArgs`). For a
single-host system `patch_thespian_bind()` replaces IPActorAddress.bindArgs so '' becomes the
host we were given (127.0.0.1). The patch is applied in the launching process before the
actor system starts; the admin and every actor are forked from it (Process Startup Method
'fork'), so they inherit it. Only the ports the user asked for (name server, broker) listen
on the host given by --host.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
_patched_host: str | None = None


def prepare_environment(thespian_host: str, thesplog_file: str | None) -> None:
    """Set Thespian's environment; must run before thespian is first imported."""
    os.environ["THESPIAN_BASE_IPADDR"] = thespian_host
    if thesplog_file:
        os.environ["THESPLOG_FILE"] = thesplog_file
        os.environ.setdefault("THESPLOG_FILE_MAXSIZE", str(10 * 1024 * 1024))
        os.environ.setdefault("THESPLOG_THRESHOLD", "WARNING")


def patch_thespian_bind(host: str = LOOPBACK) -> None:
    """Make Thespian's TCP transport bind `host` instead of every interface (see module doc)."""
    global _patched_host
    from thespian.system.transport.IPBase import IPActorAddress

    if _patched_host == host:
        return

    def bind_args(self: Any) -> tuple[tuple[str, int]]:
        name = self.bindname
        if not name[0]:
            return ((host, name[1]),)
        return (tuple(name),)  # type: ignore[return-value]

    IPActorAddress.bindArgs = property(bind_args)  # type: ignore[assignment]
    _patched_host = host
    log.debug("thespian transport bound to %s", host)


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def stable_free_port(host: str = LOOPBACK, *, pair: bool = False, tries: int = 200) -> int:
    """A free port below the kernel's ephemeral range (with P - 2 free too when `pair`).

    A port the OS handed out for port 0 is ephemeral: a process started later (an actor system
    binding its own port-0 sockets) may take it before the server binds it. Ports below
    ip_local_port_range are never handed out that way. Falls back to free_port_pair.
    """
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    lo, hi = max(1100, low - 12000), low - 1
    for _ in range(tries if hi > lo else 0):
        port = rng.randrange(lo, hi)
        if port_is_free(port, host) and (not pair or port_is_free(port - 2, host)):
            return port
    return free_port_pair(host) if pair else free_port(host)


def free_port_pair(host: str = LOOPBACK, tries: int = 50) -> int:
    """A free port P with P - 2 free too (the VIP port); any free port after `tries`."""
    port = free_port(host)
    for _ in range(tries):
        if port > 1026 and port_is_free(port - 2, host):
            return port
        port = free_port(host)
    return port


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when `port` can be bound on `host` and on every interface."""
    for h in (host, ""):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((h, port))
            except OSError:
                return False
    return True


def log_defs(log_file: str, level: str = "INFO") -> dict[str, Any]:
    """logging dictConfig for the actor system (actors' `logging` goes to log_file)."""
    return {
        "version": 1,
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s"}
        },
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": log_file,
                "formatter": "plain",
                "level": level,
            }
        },
        "root": {"handlers": ["file"], "level": level},
        "disable_existing_loggers": False,
    }


@dataclass
class LocalCluster:
    """One actor system on this host with its name server and/or brokers."""

    asys: Any
    admin_port: int
    data_dir: str
    runtime_dir: str
    namesrv_port: int | None = None
    namesrv: Any = None
    brokers: dict[str, tuple[Any, int]] = field(default_factory=dict)  # name -> (addr, port)
    fast_ports: dict[str, int] = field(default_factory=dict)  # name -> VIP port (0 = none)
    spark_bridge: Any = None  # the SparkBridgeActor's address, when one runs here
    spark_bridge_port: int | None = None
    stopped: bool = False

    def namesrv_addr(self) -> str:
        """host:port of the name server."""
        return f"{LOOPBACK}:{self.namesrv_port}"

    def broker_port(self, name: str | None = None) -> int:
        """The client port of a broker (the only one when name is None)."""
        if name is None:
            name = next(iter(self.brokers))
        return self.brokers[name][1]

    def broker_fast_port(self, name: str | None = None) -> int:
        """The VIP port of a broker (0 when it runs without one)."""
        if name is None:
            name = next(iter(self.brokers))
        return self.fast_ports.get(name, 0)


class StartError(RuntimeError):
    """A server could not start (a port in use, a locked store, ...): the CLI exits 2."""


def start_system(
    data_dir: str,
    *,
    admin_port: int | None = None,
    log_level: str = "INFO",
) -> LocalCluster:
    """Start a multiprocTCPBase actor system (free Admin Port, logs under data_dir)."""
    os.makedirs(data_dir, exist_ok=True)
    data_dir = os.path.abspath(data_dir)
    # Thespian's ports stay on loopback whatever --host says: every actor system here is a
    # single-host one (a broker on another host is its own actor system and talks RocketMQ's
    # protocol), and those ports take unauthenticated pickles
    prepare_environment(LOOPBACK, os.path.join(data_dir, "thespian.log"))
    patch_thespian_bind(LOOPBACK)
    from thespian.actors import ActorSystem

    if admin_port is None:
        admin_port = stable_free_port()
    elif not port_is_free(admin_port):
        raise StartError(f"Thespian Admin Port {admin_port} is in use (stale actor system?)")
    capabilities = {"Admin Port": admin_port, "Process Startup Method": "fork"}
    asys = ActorSystem(
        "multiprocTCPBase",
        capabilities,
        logDefs=log_defs(os.path.join(data_dir, "actormq.log"), log_level),
        transientUnique=True,
    )
    runtime_dir = tempfile.mkdtemp(prefix="amq-")  # short: Unix socket paths max 107 bytes
    os.chmod(runtime_dir, 0o700)
    log.info("actor system up, admin port %d", admin_port)
    return LocalCluster(asys, admin_port, data_dir, runtime_dir)


def _await(asys: Any, expect: tuple[type, ...], timeout_s: float) -> Any:
    """Listen until a message of one of `expect` arrives (ignores others); None on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        from datetime import timedelta

        msg = asys.listen(timedelta(seconds=left))
        if msg is None:
            return None
        if isinstance(msg, expect):
            return msg
        log.debug("launcher ignored %r", msg)


def start_namesrv(cluster: LocalCluster, *, port: int = 9876, host: str = LOOPBACK,
                  idle_s: float = 120.0, config: Any = None) -> int:
    """Create the NameServer actor and wait until it listens; return its port.

    config: a NamesrvConfig (its kvConfigPath / configStorePath persist what admins change;
    its listenPort and serverChannelMaxIdleTimeSeconds are the port and idle limit), or None
    for one with nothing persisted."""
    from actors.namesrv.actor import NameServerActor
    from actors.runtime.messages import NamesrvStarted, NamesrvStartFailed, StartNamesrv

    if config is not None:
        port, idle_s = int(config.listenPort), float(config.serverChannelMaxIdleTimeSeconds)
    addr = cluster.asys.createActor(NameServerActor)
    cluster.asys.tell(addr, StartNamesrv(host, port, config, idle_s))
    reply = _await(cluster.asys, (NamesrvStarted, NamesrvStartFailed), START_TIMEOUT_S)
    if not isinstance(reply, NamesrvStarted):
        reason = reply.reason if reply is not None else "timeout"
        raise StartError(f"name server failed to start: {reason}")
    cluster.namesrv = addr
    cluster.namesrv_port = reply.port
    return int(reply.port)


def start_broker(
    cluster: LocalCluster,
    broker_config: Any,
    store_config: Any,
    *,
    host: str = LOOPBACK,
    idle_s: float = 120.0,
    max_frame: int = 16 * 1024 * 1024,
    personality: str | None = None,
) -> int:
    """Create a broker (controller, processors, remoting); return its client port."""
    from actors.broker.actor import BrokerControllerActor
    from actors.runtime.messages import BrokerStarted, BrokerStartFailed, StartBroker

    name = str(getattr(broker_config, "brokerName", "broker"))
    broker_id = int(getattr(broker_config, "brokerId", 0))
    if broker_id:  # a slave shares its master's brokerName
        name = f"{name}-{broker_id}"
    if int(getattr(broker_config, "listenPort", 0)) == 0 and hasattr(broker_config, "replace"):
        # the port is advertised (name server routes, msgId store host): fix it before start;
        # P - 2 free too so the VIP channel gets its usual port
        local = host if host != "0.0.0.0" else LOOPBACK
        derived = getattr(broker_config, "fastListenPort", None) is None
        # below the ephemeral range: the actor system's own port-0 sockets cannot take it
        # between this pick and the RemotingServer's bind
        broker_config = broker_config.replace(listenPort=stable_free_port(local, pair=derived))
    rdir = os.path.join(cluster.runtime_dir, f"{name}-{len(cluster.brokers)}")
    addr = cluster.asys.createActor(BrokerControllerActor)
    cluster.asys.tell(addr, StartBroker(broker_config, store_config, rdir, host, idle_s,
                                        max_frame, personality))
    reply = _await(cluster.asys, (BrokerStarted, BrokerStartFailed), START_TIMEOUT_S)
    if not isinstance(reply, BrokerStarted):
        reason = reply.reason if reply is not None else "timeout"
        cluster.brokers[name] = (addr, 0)
        raise StartError(f"broker {name} failed to start: {reason}")
    cluster.brokers[name] = (addr, reply.port)
    cluster.fast_ports[name] = int(getattr(reply, "fast_port", 0) or 0)
    log.info("broker %s serving on %s (VIP port %s)", name, reply.addr,
             cluster.fast_ports[name] or "off")
    return int(reply.port)


def start_spark_bridge(cluster: LocalCluster, name_servers: str, *, host: str = LOOPBACK,
                       port: int = 0, advertise: str = "") -> int:
    """Create the SparkBridge actor and wait until it listens; return its port."""
    from actors.spark_bridge.actor import SparkBridgeActor
    from actors.spark_bridge.messages import (
        SparkBridgeStarted,
        SparkBridgeStartFailed,
        StartSparkBridge,
    )

    servers = tuple(a.strip() for a in name_servers.split(";") if a.strip())
    if not servers:
        raise StartError("the spark bridge needs a name server address")
    addr = cluster.asys.createActor(SparkBridgeActor)
    cluster.asys.tell(addr, StartSparkBridge(host, port, servers, advertise))
    reply = _await(cluster.asys, (SparkBridgeStarted, SparkBridgeStartFailed), START_TIMEOUT_S)
    if not isinstance(reply, SparkBridgeStarted):
        reason = reply.reason if reply is not None else "timeout"
        raise StartError(f"spark bridge failed to start: {reason}")
    cluster.spark_bridge = addr
    cluster.spark_bridge_port = reply.port
    return int(reply.port)


def _stop_spark_bridge(cluster: LocalCluster) -> None:
    """Withdraw the bridge's name-server entry before the name server stops."""
    if cluster.spark_bridge is None:
        return
    from actors.spark_bridge.messages import SparkBridgeStopped, StopSparkBridge

    try:
        cluster.asys.tell(cluster.spark_bridge, StopSparkBridge())
        if _await(cluster.asys, (SparkBridgeStopped,), STOP_TIMEOUT_S) is None:
            log.warning("spark bridge did not confirm shutdown")
    except Exception:
        log.exception("stopping the spark bridge failed")


def stop_cluster(cluster: LocalCluster) -> None:
    """Stop brokers cleanly (store shutdown, offsets, unregister), then the actor system."""
    if cluster.stopped:
        return
    cluster.stopped = True
    try:
        _stop_spark_bridge(cluster)
        from actors.runtime.messages import BrokerStopped, StopBroker

        for name, (addr, _port) in cluster.brokers.items():
            try:
                cluster.asys.tell(addr, StopBroker())
                reply = _await(cluster.asys, (BrokerStopped,), STOP_TIMEOUT_S)
                if reply is None:
                    log.warning("broker %s did not confirm shutdown", name)
                elif not reply.ok:
                    log.warning("broker %s shutdown: %s", name, reply.detail)
            except Exception:
                log.exception("stopping broker %s failed", name)
    finally:
        try:
            cluster.asys.shutdown()
        finally:
            shutil.rmtree(cluster.runtime_dir, ignore_errors=True)
