"""Thespian control messages of the SparkBridge actor (start / stop only, never per request).

Mirrors the start/stop choreography of namesrv/NamesrvController.java (initialize, start,
shutdown), as actors.runtime.messages does for the broker and name server. Class names are
unique across the project (Thespian dispatch matches bare class names).
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.runtime.tls import TlsConfig
from protocol.acl import SessionCredentials


@dataclass(frozen=True)
class StartSparkBridge:
    """Launcher -> SparkBridgeActor: listen and register with the name servers."""

    host: str
    port: int
    name_servers: tuple[str, ...]
    advertise: str = ""  # host:port put in the name servers' KV ("" = host:bound port)
    idle_s: float = 120.0
    credentials: SessionCredentials | None = None  # signs the KV entry (ACL on the name server)
    tls: TlsConfig | None = None  # its port's tls.server.mode; tls.enable: to the cluster


@dataclass(frozen=True)
class SparkBridgeStarted:
    """SparkBridgeActor -> launcher: serving on port."""

    port: int
    advertise: str
    pid: int = 0  # the bridge's process (the launcher stops waiting for it once it is gone)


@dataclass(frozen=True)
class SparkBridgeStartFailed:
    """SparkBridgeActor -> launcher: it could not start."""

    reason: str


@dataclass(frozen=True)
class StopSparkBridge:
    """Launcher -> SparkBridgeActor: withdraw the KV entry and close every connection."""


@dataclass(frozen=True)
class SparkBridgeStopped:
    """SparkBridgeActor -> launcher: stopped."""
