"""Start and stop actormq actor systems: name server and brokers on one host.

Mirrors namesrv/NamesrvStartup.java and broker/BrokerStartup.java, RocketMQ 4.9.x: build the
configs, start the roles, install a shutdown hook. Here a role is a Thespian actor in a
multiprocTCPBase actor system whose admin gets a free Admin Port and whose own log goes to a
file (THESPLOG_FILE).

Security: Thespian's actor and admin ports unpickle what arrives, and its TCP transport binds
'' (every interface) for addresses marked external. `patch_thespian_transport()`
(actors.runtime.loopback) makes them bind 127.0.0.1 and authenticates every packet with a random
key held only in memory by this process tree (actors.runtime.thespian_auth): a peer that is not
part of this actor system (another local user, another run) is refused before anything is
unpickled. It is applied in the launching process before the actor system starts; the admin and
every actor are forked from it (Process Startup Method 'fork'), so they inherit it. Only the
ports the user asked for (name server, broker, VIP, HA) listen on the host given by --host.

Logging: every actor process appends its own records to `<data>/actormq.log`
(deploy.actor_logging); nothing an actor logs travels through Thespian's transport.

Supervision: the name server and each broker controller are started under a RoleSupervisor
(actors.runtime.supervisor), which replaces them when they die; the controller replaces its
own children (actors.broker.supervision). The launcher's serving loop, its stop signal and
the start steps a signal interrupts are deploy.shutdown_hook's.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actors.runtime.loopback import (  # noqa: F401  # re-exported; the client runtime shares them
    LOOPBACK,
    free_port,
    free_port_pair,
    patch_thespian_transport,
    port_is_free,
    prepare_environment,
    stable_free_port,
    start_actor_system,
)
from deploy import actor_logging, runtime_dir
from deploy.shutdown_hook import StartInterrupted, StopSignal

if TYPE_CHECKING:
    from actors.broker.config import BrokerConfig
    from actors.namesrv.config import NamesrvConfig
    from actors.runtime.tls import TlsConfig
    from protocol.acl import SessionCredentials
    from store.config import StoreConfig

log = logging.getLogger(__name__)

BROKER_CONTROLLER = "actors.broker.actor.BrokerControllerActor"  # what start_broker supervises
NAME_SERVER = "actors.namesrv.actor.NameServerActor"

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
ANSWERER_POLL_S = 0.25  # _await: how often it looks whether the answerer is still there
REAP_WAIT_S = 10.0  # after the actor system's shutdown, before its late processes are killed


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
    supervisor_pids: dict[str, int] = field(default_factory=dict)  # role -> its supervisor's pid
    spark_bridge: Any = None  # the SparkBridgeActor's address, when one runs here
    spark_bridge_port: int | None = None
    spark_bridge_pid: int | None = None
    role_failures: list[Any] = field(default_factory=list)  # RoleFailed heard while starting
    interrupt: StopSignal | None = None  # set: the next role does not start (StartInterrupted)
    abandoned: bool = False  # a start thread still holds the actor system (its admin is gone)
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


def writable_dir(path: str, what: str) -> str:
    """`path` made absolute and created if missing; StartError naming it and the problem unless
    it is a directory this process can create files in."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.lexists(path) and not os.path.isdir(path):
        raise StartError(f"{what} {path} is not a directory (a file is in its place)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise StartError(f"cannot create {what} {path}: {e.strerror or e}") from None
    try:  # the only sure test: permissions, a read-only mount, a full inode table
        fd, probe = tempfile.mkstemp(prefix=".actormq-probe-", dir=path)
    except OSError as e:
        raise StartError(f"{what} {path} is not writable: {e.strerror or e}") from None
    os.close(fd)
    os.unlink(probe)
    return path


def check_store_paths(store_config: StoreConfig) -> None:
    """The broker's store directories are writable directories (StartError otherwise)."""
    writable_dir(store_config.storePathRootDir, "the store directory (storePathRootDir)")
    if store_config.storePathCommitLog:
        writable_dir(store_config.commitlog_path, "the commit log directory "
                                                  "(storePathCommitLog)")  # fmt: skip


def check_acl(enabled: bool, home: str, acl_file: str) -> None:
    """With aclEnable, the ACL files under `home` load, `acl_file` the default one (its
    rocketmq.acl.plain.file); StartError naming the file and the fault."""
    if not enabled:
        return
    from actors.acl.plain_permission_manager import PlainPermissionManager, acl_files
    from actors.acl.remote_address_strategy import AclError

    if not acl_files(home, acl_file):
        acl_dir = os.path.join(home, "conf", "acl")
        raise StartError(f"aclEnable: no ACL file: {os.path.join(home, acl_file)} does not exist "
                         f"(nor any *.yml under {acl_dir})")
    try:
        PlainPermissionManager(home, acl_file).load()
    except AclError as exc:
        raise StartError(f"aclEnable: {exc}") from None


def is_public(host: str) -> bool:
    """Whether `host` is an address of the public internet (not loopback, private, link-local
    or every interface); a name is looked up."""
    import ipaddress
    import socket as _socket

    if host in ("", "0.0.0.0", "::"):
        return False
    try:
        addr = ipaddress.ip_address(_socket.gethostbyname(host))
    except (OSError, ValueError):
        return False
    return bool(addr.is_global)


def check_private_ports(host: str, broker_config: BrokerConfig, store_config: StoreConfig,
                        tls: TlsConfig | None) -> None:  # fmt: skip
    """The HA port (plain, as RocketMQ's) listens on a public address only when the client
    ports enforce TLS; TCP processor channels never do (StartError naming the setting)."""
    enforcing = tls is not None and tls.server_mode.value == "enforcing"
    if (not enforcing and store_config.haListenPort != -1 and not broker_config.is_slave
            and is_public(host)):  # fmt: skip
        raise StartError(f"the HA port would listen on public address {host} in clear: bind a "
                         "loopback or private address, set haListenPort=-1, or enforce TLS "
                         "(tls.server.mode=enforcing)")  # fmt: skip
    if broker_config.processorChannel == "tcp" and is_public(broker_config.processorChannelHost):
        raise StartError(f"processorChannelHost={broker_config.processorChannelHost} is a "
                         "public address: the channels carry state in clear; use a loopback "
                         "or private address")  # fmt: skip


def broker_ports(bc: BrokerConfig, sc: StoreConfig) -> set[int]:
    """The ports a broker started with these configs will listen on: its own and the VIP port
    below it (none when it takes any free port: listenPort 0), and a master's HA port
    (haListenPort; 0: the port above its own, as the broker derives it; -1: none)."""
    port, ha = bc.listenPort, sc.haListenPort
    ports = {port, port - 2} if port > 0 else set()
    if ha > 0:
        ports.add(ha)
    elif ha == 0 and port > 0:
        ports.add(port + 1)
    return {p for p in ports if p > 0}


def start_system(
    data_dir: str,
    *,
    admin_port: int | None = None,
    log_level: str = "INFO",
    reserved: Collection[int] = (),
) -> LocalCluster:
    """Start a multiprocTCPBase actor system (free Admin Port, none of `reserved`: the ports
    the run's servers will listen on; logs under data_dir)."""
    data_dir = writable_dir(data_dir, "the data directory")
    # Thespian's ports stay on loopback whatever --host says: every actor system here is a
    # single-host one (a broker on another host is its own actor system and talks RocketMQ's
    # protocol); they take pickles, so only from this process tree (its in-memory key)
    prepare_environment(LOOPBACK, os.path.join(data_dir, "thespian.log"))
    patch_thespian_transport(LOOPBACK)

    runtime_dir.clean_dead()  # what runs killed with SIGKILL left behind
    if admin_port is None:
        admin_port = stable_free_port(avoid=reserved)
    elif not port_is_free(admin_port):
        from deploy.procinfo import pid_listening_on

        holder = pid_listening_on(admin_port)
        who = f" by process {holder}" if holder is not None else ""
        raise StartError(f"Thespian Admin Port {admin_port} is in use{who} (a running actor "
                         "system? stop it first)")
    log_file = os.path.join(data_dir, "actormq.log")
    with actor_logging.directly(log_file, log_level):  # the admin forks in here
        asys = start_actor_system(admin_port, log_defs(log_file, log_level))
    rdir = runtime_dir.create(admin_port)  # Unix sockets of this run; removed at stop
    log.info("actor system up, admin port %d", admin_port)
    return LocalCluster(asys, admin_port, data_dir, rdir)


def _await(asys: Any, expect: tuple[type, ...], timeout_s: float,
           cluster: LocalCluster | None = None, answerer: int | None = None) -> Any:
    """Listen until a message of one of `expect` arrives; None on timeout, or as soon as the
    process `answerer` (the one that would answer) is gone. A RoleFailed that arrives
    meanwhile is kept on `cluster` for wait_for_stop; other messages are ignored."""
    from datetime import timedelta

    from actors.runtime.messages import RoleFailed
    from deploy.procinfo import is_zombie

    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if answerer is not None:
            if is_zombie(answerer):  # ended (a dead one's zombie reads as such too)
                return None
            left = min(left, ANSWERER_POLL_S)
        msg = asys.listen(timedelta(seconds=left))
        if msg is None:
            if answerer is not None and deadline - time.monotonic() > 0:
                continue  # only a look at the answerer: listen again
            return None
        if isinstance(msg, expect):
            return msg
        if isinstance(msg, RoleFailed) and cluster is not None:
            cluster.role_failures.append(msg)
            continue
        log.debug("launcher ignored %r", msg)


def _checkpoint(cluster: LocalCluster) -> None:
    """Before a role starts: StartInterrupted when a stop signal came during start_steps."""
    if cluster.interrupt is not None and cluster.interrupt.is_set():
        raise StartInterrupted(cluster.interrupt.signame)


def _supervised(cluster: LocalCluster, role: str, actor_class: str, start: Any,
                expect: tuple[type, ...]) -> tuple[Any, Any]:
    """Start `actor_class` under a RoleSupervisor; (the supervisor's address, the answer)."""
    from actors.runtime.messages import Supervise, Supervising
    from actors.runtime.supervisor import RoleSupervisor

    _checkpoint(cluster)
    sup = cluster.asys.createActor(RoleSupervisor)
    cluster.asys.tell(sup, Supervise(role, actor_class, start, os.getpid()))
    hello = _await(cluster.asys, (Supervising,), START_TIMEOUT_S, cluster)
    if hello is not None:
        cluster.supervisor_pids[role] = int(hello.pid)
    return sup, _await(cluster.asys, expect, START_TIMEOUT_S, cluster)


def start_namesrv(cluster: LocalCluster, *, port: int = 9876, host: str = LOOPBACK,
                  idle_s: float = 120.0, config: NamesrvConfig | None = None,
                  tls: TlsConfig | None = None) -> int:
    """Create the NameServer actor (supervised) and wait until it listens; return its port.

    config: a NamesrvConfig (its kvConfigPath / configStorePath persist what admins change;
    its listenPort and serverChannelMaxIdleTimeSeconds are the port and idle limit), or None
    for one with nothing persisted."""
    from actors.runtime.messages import NamesrvStarted, NamesrvStartFailed, StartNamesrv

    if config is not None:
        port, idle_s = int(config.listenPort), float(config.serverChannelMaxIdleTimeSeconds)
        check_acl(config.aclEnable, config.acl_home, config.aclPlainFile)
    addr, reply = _supervised(cluster, "namesrv", NAME_SERVER,
                              StartNamesrv(host, port, config, idle_s, tls=tls),
                              (NamesrvStarted, NamesrvStartFailed))  # fmt: skip
    if not isinstance(reply, NamesrvStarted):
        reason = reply.reason if reply is not None else "timeout"
        raise StartError(f"name server failed to start: {reason}")
    cluster.namesrv = addr
    cluster.namesrv_port = reply.port
    return int(reply.port)


def start_broker(
    cluster: LocalCluster,
    broker_config: BrokerConfig,
    store_config: StoreConfig,
    *,
    host: str = LOOPBACK,
    idle_s: float = 120.0,
    max_frame: int = 16 * 1024 * 1024,
    actor_class: str = BROKER_CONTROLLER,
    tls: TlsConfig | None = None,
) -> int:
    """Create a broker (controller, processors, remoting; supervised); return its port.

    actor_class: the dotted path of the broker's controller actor (BrokerControllerActor, or
    a subclass of it made of other processors: its PERSONALITY)."""
    from actors.runtime.messages import BrokerStarted, BrokerStartFailed, StartBroker

    check_store_paths(store_config)
    check_acl(broker_config.aclEnable, broker_config.acl_home, broker_config.aclPlainFile)
    check_private_ports(host, broker_config, store_config, tls)
    name = broker_config.brokerName
    if broker_config.brokerId:  # a slave shares its master's brokerName
        name = f"{name}-{broker_config.brokerId}"
    if broker_config.listenPort == 0:
        # the port is advertised (name server routes, msgId store host): fix it before start;
        # P - 2 free too so the VIP channel gets its usual port
        local = host if host != "0.0.0.0" else LOOPBACK
        derived = broker_config.fastListenPort is None
        # below the ephemeral range: the actor system's own port-0 sockets cannot take it
        # between this pick and the RemotingServer's bind
        broker_config = broker_config.replace(listenPort=stable_free_port(local, pair=derived))
    rdir = os.path.join(cluster.runtime_dir, f"{name}-{len(cluster.brokers)}")
    start = StartBroker(broker_config, store_config, rdir, host, idle_s, max_frame, tls)
    addr, reply = _supervised(cluster, name, actor_class, start,
                              (BrokerStarted, BrokerStartFailed))  # fmt: skip
    if not isinstance(reply, BrokerStarted):
        reason = reply.reason if reply is not None else "timeout"
        cluster.brokers[name] = (addr, 0)
        raise StartError(f"broker {name} failed to start: {reason}")
    cluster.brokers[name] = (addr, reply.port)
    cluster.fast_ports[name] = reply.fast_port
    log.info("broker %s serving on %s (VIP port %s)", name, reply.addr,
             cluster.fast_ports[name] or "off")
    return int(reply.port)


def start_spark_bridge(cluster: LocalCluster, name_servers: str, *, host: str = LOOPBACK,
                       port: int = 0, advertise: str = "",
                       credentials: SessionCredentials | None = None,
                       tls: TlsConfig | None = None) -> int:  # fmt: skip
    """Create the SparkBridge actor and wait until it listens; return its port.
    credentials: the keys its name-server entry is signed with (an admin account when the
    name server runs ACL)."""
    from actors.spark_bridge.actor import SparkBridgeActor
    from actors.spark_bridge.messages import (
        SparkBridgeStarted,
        SparkBridgeStartFailed,
        StartSparkBridge,
    )

    servers = tuple(a.strip() for a in name_servers.split(";") if a.strip())
    if not servers:
        raise StartError("the spark bridge needs a name server address")
    _checkpoint(cluster)
    addr = cluster.asys.createActor(SparkBridgeActor)
    cluster.asys.tell(addr, StartSparkBridge(host, port, servers, advertise,
                                             credentials=credentials, tls=tls))  # fmt: skip
    reply = _await(cluster.asys, (SparkBridgeStarted, SparkBridgeStartFailed),
                   START_TIMEOUT_S, cluster)  # fmt: skip
    if not isinstance(reply, SparkBridgeStarted):
        reason = reply.reason if reply is not None else "timeout"
        raise StartError(f"spark bridge failed to start: {reason}")
    cluster.spark_bridge = addr
    cluster.spark_bridge_port = reply.port
    cluster.spark_bridge_pid = reply.pid or None
    return int(reply.port)


def _stop_spark_bridge(cluster: LocalCluster) -> None:
    """Withdraw the bridge's name-server entry before the name server stops."""
    if cluster.spark_bridge is None:
        return
    from actors.spark_bridge.messages import SparkBridgeStopped, StopSparkBridge
    from deploy.procinfo import is_zombie

    try:
        cluster.asys.tell(cluster.spark_bridge, StopSparkBridge())
        pid = cluster.spark_bridge_pid
        if _await(cluster.asys, (SparkBridgeStopped,), STOP_TIMEOUT_S, answerer=pid) is None:
            log.warning("spark bridge did not confirm shutdown%s",
                        " (it ended first)" if pid is not None and is_zombie(pid) else "")
    except Exception:
        log.exception("stopping the spark bridge failed")


def stop_cluster(cluster: LocalCluster) -> None:
    """Stop brokers cleanly (store shutdown, offsets, unregister), then the actor system."""
    if cluster.stopped:
        return
    cluster.stopped = True
    if cluster.abandoned:  # its admin is gone and a start thread is inside the actor system
        log.warning("the actor system's admin ended while starting: reaping what is left")
        _reap(_system_processes(cluster))
        shutil.rmtree(cluster.runtime_dir, ignore_errors=True)
        return
    try:
        _stop_spark_bridge(cluster)
        from actors.runtime.messages import BrokerStopped, StopBroker
        from deploy.procinfo import is_zombie

        for name, (addr, _port) in cluster.brokers.items():
            sup_pid = cluster.supervisor_pids.get(name)
            if sup_pid is not None and is_zombie(sup_pid):
                log.warning("broker %s: its supervisor is gone; stopped by the shutdown", name)
                continue
            try:
                cluster.asys.tell(addr, StopBroker())
                reply = _await(cluster.asys, (BrokerStopped,), STOP_TIMEOUT_S, answerer=sup_pid)
                if reply is None and sup_pid is not None and is_zombie(sup_pid):
                    # e.g. SIGTERM to every process of the run (a service manager's stop):
                    # each actor stopped itself, stores flushed
                    log.warning("broker %s: its supervisor ended before it answered", name)
                elif reply is None:
                    log.warning("broker %s did not confirm shutdown", name)
                elif not reply.ok:
                    log.warning("broker %s shutdown: %s", name, reply.detail)
            except Exception:
                log.exception("stopping broker %s failed", name)
    finally:
        system = _system_processes(cluster)
        try:
            cluster.asys.shutdown()
        finally:
            _reap(system)
            shutil.rmtree(cluster.runtime_dir, ignore_errors=True)


def cluster_pids(cluster: LocalCluster) -> list[int]:
    """Every live process of the cluster's actor system (the session of its admin)."""
    from deploy import procinfo

    admin = procinfo.pid_listening_on(cluster.admin_port)
    if admin is None:
        return []
    sid = procinfo.session_id(admin)
    return procinfo.pids_in_session(sid) if sid is not None else [admin]


def _system_processes(cluster: LocalCluster) -> list[tuple[int, int]]:
    """(pid, start time) of the actor system's admin and every process below it."""
    from deploy.procinfo import descendants, pid_listening_on, start_time

    admin = pid_listening_on(cluster.admin_port)
    if admin is None or admin == os.getpid():
        return []
    return [(p, start_time(p)) for p in [admin, *descendants(admin)]]


def _reap(procs: list[tuple[int, int]]) -> None:
    """Wait for the actor system's processes to exit after its shutdown; SIGKILL the late ones
    (named in a warning): a stopped launcher leaves nothing behind."""
    import signal

    from deploy.procinfo import is_zombie, start_time

    def alive() -> list[int]:
        return [p for p, t in procs if start_time(p) == t and not is_zombie(p)]

    deadline = time.monotonic() + REAP_WAIT_S
    left = alive()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = alive()
    if left:
        log.warning("actor system processes %s outlived its shutdown by %.0f s: killing them",
                    left, REAP_WAIT_S)  # fmt: skip
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
