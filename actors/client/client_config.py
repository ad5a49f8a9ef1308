"""Settings every client shares: name servers, instance name, the client id, the intervals.

Mirrors client/ClientConfig.java, RocketMQ 4.9.x (defaults verified against 4.9.8:
pollNameServerInterval 30 s, heartbeatBrokerInterval 30 s, persistConsumerOffsetInterval 5 s,
mqClientApiTimeout 3 s). The client id is `ip@instanceName[@unitName]`
(buildMQClientId).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from actors.runtime.tls import TlsConfig
from protocol.acl import SessionCredentials
from protocol.codes import SerializeType
from protocol.command import RemotingCommand

DEFAULT_INSTANCE: Final = "DEFAULT"
SERIALIZE_TYPES: Final = {"json": SerializeType.JSON, "rocketmq": SerializeType.ROCKETMQ,
                          "msgpack": SerializeType.MSGPACK}


def client_ip() -> str:
    """This host's IPv4 address as Java's RemotingUtil.getLocalAddress picks it (loopback last)."""
    try:
        addr = socket.gethostbyname(socket.gethostname())
        if not addr.startswith("127."):
            return addr
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET: a UDP connect sends nothing
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def parse_namesrv(namesrv: str | Sequence[str]) -> tuple[str, ...]:
    """'h1:9876;h2:9876' (or a list) -> ('h1:9876', 'h2:9876'); ValueError when empty/bad."""
    parts = namesrv.split(";") if isinstance(namesrv, str) else list(namesrv)
    addrs = tuple(p.strip() for p in parts if p and p.strip())
    if not addrs:
        raise ValueError("no name server address given (namesrv='host:9876[;host2:9876]')")
    for a in addrs:
        host, _, port = a.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad name server address {a!r}, expected host:port")
    return addrs


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """One MQClientInstance's settings (picklable: it travels to the instance actor)."""

    namesrv_addrs: tuple[str, ...]
    instance_name: str = DEFAULT_INSTANCE
    client_ip: str = ""
    unit_name: str | None = None
    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    mq_client_api_timeout_ms: int = 3_000
    serialize_type: int = SerializeType.JSON  # what our requests' headers use
    vip_channel_enabled: bool = False  # Java 4.4+ default: false
    # ACL (AclClientRPCHook): every request is signed when set; its secret is in no repr
    credentials: SessionCredentials | None = None
    # useTLS (Java: -Dtls.enable=true): every connection is TLS with these client settings
    tls: TlsConfig | None = None

    def __post_init__(self) -> None:
        if not self.client_ip:
            object.__setattr__(self, "client_ip", client_ip())

    def sign(self, cmd: RemotingCommand) -> RemotingCommand:
        """AclClientRPCHook.doBeforeRequest: AccessKey (and SecurityToken) and the Signature
        over the request's fields and body, when this client has credentials."""
        return cmd if self.credentials is None else self.credentials.sign(cmd)

    def client_id(self) -> str:
        """ip@instanceName[@unitName] (Java's buildMQClientId)."""
        cid = f"{self.client_ip}@{self.instance_name}"
        return f"{cid}@{self.unit_name}" if self.unit_name else cid

    def with_instance(self, name: str) -> ClientConfig:
        """A copy with another instance name."""
        return replace(self, instance_name=name)


def tls_setting(use_tls: bool | TlsConfig) -> TlsConfig | None:
    """A client's `use_tls=` as its TLS settings: False -> plain; True -> TLS as the Java
    client's -Dtls.enable=true with its defaults (test mode: any server certificate is
    accepted); a TlsConfig (e.g. TlsConfig.verifying(ca)) -> TLS with its settings."""
    if isinstance(use_tls, TlsConfig):
        return use_tls if use_tls.enable else use_tls.replace(enable=True)
    if use_tls is True:
        return TlsConfig(enable=True)
    if use_tls is False:
        return None
    raise TypeError(f"use_tls: expected a bool or a TlsConfig, got {type(use_tls).__name__}")


def default_instance_name(seq: int = 1) -> str:
    """The pid for the process's first instance, pid#N for further ones."""
    pid = os.getpid()
    return str(pid) if seq <= 1 else f"{pid}#{seq}"
