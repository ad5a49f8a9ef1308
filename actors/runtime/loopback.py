"""Thespian on loopback: its environment, its TCP transport's bind address and its key.

Mirrors nothing in RocketMQ. Thespian's TCP transport binds '' (every interface) for addresses
marked external (thespian/system/transport/IPBase.py, IPActorAddress.__init__: `bindname =
('', port) if external else sockname`, used by TCPTransport.__init__ via
`addressDetails.bindArgs`), and its actor and admin ports unpickle what arrives.
`patch_thespian_transport()` replaces IPActorAddress.bindArgs so '' becomes the host given
(127.0.0.1), and authenticates every packet with a key only this process tree holds
(actors.runtime.thespian_auth). Apply it in the process that starts the actor system, before it
starts: the admin and every actor are forked from it (Process Startup Method 'fork') and inherit
both. Used by deploy.launch (servers) and actors.client.client_runtime (clients), with
start_actor_system and the free-port helpers below (an Admin Port or a server port nobody
listens on).
"""

from __future__ import annotations

import logging
import os
import random
import socket
from collections.abc import Collection
from typing import Any

from actors.runtime import thespian_auth

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
_patched_host: str | None = None


def prepare_environment(thespian_host: str, thesplog_file: str | None) -> None:
    """Set Thespian's environment; must run before thespian is first imported."""
    os.environ["THESPIAN_BASE_IPADDR"] = thespian_host
    if thesplog_file:
        os.environ["THESPLOG_FILE"] = thesplog_file
        os.environ.setdefault("THESPLOG_FILE_MAXSIZE", str(10 * 1024 * 1024))
        os.environ.setdefault("THESPLOG_THRESHOLD", "WARNING")


def patch_thespian_transport(host: str = LOOPBACK) -> None:
    """Make Thespian's TCP transport bind `host` instead of every interface and refuse packets
    that do not carry this process tree's key (see module doc)."""
    global _patched_host
    from thespian.system.transport.IPBase import IPActorAddress

    thespian_auth.install()
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


def start_actor_system(admin_port: int, log_defs: dict[str, Any]) -> Any:
    """A multiprocTCPBase actor system whose admin listens on `admin_port`, its admin and
    actors forked from this process (after prepare_environment and patch_thespian_transport):
    the servers' (deploy.launch) and the client runtime's."""
    from thespian.actors import ActorSystem

    capabilities = {"Admin Port": admin_port, "Process Startup Method": "fork"}
    return ActorSystem("multiprocTCPBase", capabilities, logDefs=log_defs, transientUnique=True)


def exit_request() -> Any:
    """The message that stops an actor (Thespian's ActorExitRequest)."""
    from thespian.actors import ActorExitRequest

    return ActorExitRequest()


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def stable_free_port(host: str = LOOPBACK, *, pair: bool = False, tries: int = 200,
                     avoid: Collection[int] = ()) -> int:  # fmt: skip
    """A free port below the kernel's ephemeral range (with P - 2 free too when `pair`), none
    of `avoid` (ports other servers of the run will bind: free now, not later).

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
        if port in avoid or (pair and port - 2 in avoid):
            continue
        if port_is_free(port, host) and (not pair or port_is_free(port - 2, host)):
            return port
    for _ in range(100):
        port = free_port_pair(host) if pair else free_port(host)
        if port not in avoid and not (pair and port - 2 in avoid):
            return port
    raise OSError(f"no free port on {host} outside the {len(avoid)} reserved ones")


def free_port_pair(host: str = LOOPBACK, tries: int = 50) -> int:
    """A free port P with P - 2 free too (the VIP port); any free port after `tries`."""
    port = free_port(host)
    for _ in range(tries):
        if port > 1026 and port_is_free(port - 2, host):
            return port
        port = free_port(host)
    return port


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when a listener can bind `port` on `host` and on every interface.

    Bound with SO_REUSEADDR, as every listener here binds (Thespian's, the RemotingServer's,
    the HA service's): the sockets a killed run leaves in TIME_WAIT do not count, a live
    listener does."""
    for h in (host, ""):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((h, port))
            except OSError:
                return False
    return True
