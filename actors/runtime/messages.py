"""Thespian control messages of the broker and name server runtime (never per request).

Mirrors the start/stop choreography of broker/BrokerController.java and
namesrv/NamesrvController.java, RocketMQ 4.9.x (initialize, start, shutdown). Class names are
unique across the project (Thespian dispatch matches bare class names).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.broker.config import BrokerConfig
from actors.namesrv.config import NamesrvConfig
from actors.runtime.channel import ChannelAddr
from actors.runtime.tls import TlsConfig
from store.config import StoreConfig


@dataclass(frozen=True)
class StartBroker:
    """Launcher -> BrokerControllerActor: bring the whole broker up."""

    broker_config: BrokerConfig
    store_config: StoreConfig
    runtime_dir: str  # where the Unix channel sockets live (mode 0700)
    host: str = "127.0.0.1"  # listen address of the RemotingServer
    idle_s: float = 120.0
    max_frame: int = 16 * 1024 * 1024
    tls: TlsConfig | None = None  # tls.server.mode of the client ports, tls.enable of its
    # own client connections (name servers, a slave's master); None: plain only


@dataclass(frozen=True)
class BrokerStarted:
    """Controller -> launcher: the broker serves clients on addr."""

    addr: str
    port: int
    fast_port: int = 0  # the VIP port (listenPort - 2 by default); 0 = no VIP channel


@dataclass(frozen=True)
class BrokerStartFailed:
    """Controller -> launcher: startup failed."""

    reason: str


@dataclass(frozen=True)
class StopBroker:
    """Launcher -> controller: stop accepting, shut the store down, persist, unregister."""


@dataclass(frozen=True)
class BrokerStopped:
    """Controller -> launcher: clean shutdown done."""

    ok: bool = True
    detail: str = ""


@dataclass(frozen=True)
class StartProcessor:
    """Controller -> ProcessorActor: host the core of `group`."""

    group: str
    broker_config: BrokerConfig
    store_config: StoreConfig
    channel_addr: ChannelAddr  # to listen on
    snapshot: object  # controller snapshot (ControllerCore.snapshot), applied before any request
    controller: object  # controller ActorAddress (events go there)
    channel_token: bytes = b""  # TCP channels: what a connector must send first
    runtime_dir: str = ""  # the broker's private (0700) directory on this host; "" = none


@dataclass(frozen=True)
class ProcessorReady:
    """ProcessorActor -> controller: listening on channel_addr."""

    group: str
    channel_addr: ChannelAddr


@dataclass(frozen=True)
class ProcessorStartFailed:
    """ProcessorActor -> controller."""

    group: str
    reason: str


@dataclass(frozen=True)
class ConnectLink:
    """Controller -> a ProcessorActor (or the HAService): open a link to `role`'s actor, which
    listens on channel_addr (actors.runtime.links); sent again when either side is replaced."""

    role: str
    channel_addr: ChannelAddr
    channel_token: bytes = b""


@dataclass(frozen=True)
class BrokerEventBatch:
    """Processor -> controller (origin set) and controller -> processors: replicated events."""

    origin: str
    events: list[object] = field(default_factory=list)  # BrokerEvent (a personality's)


@dataclass(frozen=True)
class EventsApplied:
    """RemotingServer -> controller: events already delivered to their audience over channels,
    every batch of one timer period in one message."""

    batches: tuple[tuple[str, bytes], ...]  # (origin group, pickled list of events), in order


@dataclass(frozen=True)
class ReleaseBarrier:
    """Controller -> origin ProcessorActor: the name servers have the change; reply now."""

    token: int


@dataclass(frozen=True)
class ShutdownStore:
    """Controller -> send ProcessorActor: flush, checkpoint, remove abort, close."""


@dataclass(frozen=True)
class StoreShutdownDone:
    """Send ProcessorActor -> controller."""

    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class StartRemoting:
    """Controller -> RemotingServer: listen and route by code to processor channels."""

    host: str
    port: int
    routes: dict[str, ChannelAddr]  # group name -> its channel
    code_groups: dict[int, str]  # request code -> group name
    default_group: str
    idle_s: float = 120.0
    max_frame: int = 16 * 1024 * 1024
    fast_port: int | None = None  # VIP port: None = port - 2, -1 = off, 0 = any free port
    channel_token: bytes = b""  # TCP processor channels: sent first on each connection
    max_connections: int = 10_000  # maxConnections (ours): more are accepted and closed at once
    conn_id_base: int = 0  # a replacement RemotingServer numbers its connections above this
    # groups that answer within tens of microseconds: a pass that routed a request to one (or
    # wrote its answer) is followed by the RemotingServer's spin, any other pass is not
    spin_groups: frozenset[str] = frozenset()
    # groups that write their answers to clients themselves (ProcessorGroup.direct_replies):
    # their Unix channels get each connection's socket (actors.runtime.direct_reply)
    direct_groups: frozenset[str] = frozenset()
    # False: only connections from other hosts are shared (a local client is woken by the
    # RemotingServer's write; see BrokerConfig.directReplyToLocalClients)
    direct_local: bool = False
    # groups that hold requests (ProcessorGroup.holds_requests): the RemotingServer keeps a
    # ledger of each one's channel and answers what a dead one took (actors.runtime.request_ledger)
    ledger_groups: frozenset[str] = frozenset()
    tls: TlsConfig | None = None  # the client ports' tls.server.mode (None: plain only)


@dataclass(frozen=True)
class RemotingReady:
    """RemotingServer -> controller: bound port (and VIP port, 0 when off)."""

    port: int
    fast_port: int = 0


@dataclass(frozen=True)
class RemotingStartFailed:
    """RemotingServer -> controller."""

    reason: str


@dataclass(frozen=True)
class StopRemoting:
    """Controller -> RemotingServer: close the listener and every client connection."""


@dataclass(frozen=True)
class RemotingStopped:
    """RemotingServer -> controller."""


@dataclass(frozen=True)
class StartNamesrv:
    """Launcher -> NameServerActor."""

    host: str
    port: int
    namesrv_config: NamesrvConfig | None = None  # None: one with nothing persisted
    idle_s: float = 120.0
    max_frame: int = 16 * 1024 * 1024
    max_connections: int = 10_000  # maxConnections (ours): more are accepted and closed at once
    tls: TlsConfig | None = None  # tls.server.mode of its port (None: plain only)


@dataclass(frozen=True)
class NamesrvStarted:
    """NameServerActor -> launcher."""

    port: int


@dataclass(frozen=True)
class NamesrvStartFailed:
    """NameServerActor -> launcher."""

    reason: str


@dataclass(frozen=True)
class StartIndexer:
    """Controller -> IndexServiceActor: own the index files of this store and follow it."""

    store_config: StoreConfig


@dataclass(frozen=True)
class IndexerReady:
    """IndexServiceActor -> controller: the index lock is held, following from next_phy."""

    next_phy: int


@dataclass(frozen=True)
class IndexerFailed:
    """IndexServiceActor -> controller: it could not start."""

    reason: str


@dataclass(frozen=True)
class StopIndexer:
    """Controller -> IndexServiceActor: drain to the writer's final offset, close, reply."""


@dataclass(frozen=True)
class IndexerStopped:
    """IndexServiceActor -> controller."""

    ok: bool
    next_phy: int = -1


@dataclass(frozen=True)
class StartHA:
    """Controller -> HAServiceActor: serve the HA port for this store."""

    store_config: StoreConfig  # haSendHeartbeatInterval, haHousekeepingInterval, ...
    host: str
    port: int
    sync_master: bool = False
    free_port_fallback: bool = False  # the port was only derived: any free one if it is taken
    runtime_dir: str = ""  # where the wake pipes shared with the send actor live ("" = none)


@dataclass(frozen=True)
class HAReady:
    """HAServiceActor -> controller: listening on `port`."""

    port: int


@dataclass(frozen=True)
class HAFailed:
    """HAServiceActor -> controller: could not start."""

    reason: str


@dataclass(frozen=True)
class ConnectProcessor:
    """Controller -> RemotingServer: a replaced processor group listens on channel_addr."""

    group: str
    channel_addr: ChannelAddr
    channel_token: bytes = b""


@dataclass(frozen=True)
class SyncEvents:
    """Controller -> RemotingServer: send every replicated event held for the controller now."""


@dataclass(frozen=True)
class EventsSynced:
    """RemotingServer -> controller: every event it held went ahead of this message."""


@dataclass(frozen=True)
class Supervise:
    """Launcher -> RoleSupervisor: create `actor_class`, send it `start`, replace it when it
    dies (restarted with `start` again, the port it bound kept)."""

    role: str  # "namesrv", "broker-a", ...: how the logs and RoleFailed name it
    actor_class: str  # dotted path of the actor class
    start: StartNamesrv | StartBroker
    launcher_pid: int = 0  # the launching process: when it dies, the whole system stops (0: no)


@dataclass(frozen=True)
class RoleFailed:
    """A supervisor -> its parent (and on to the launcher): `role` keeps dying (or cannot be
    replaced); what it serves is stopped: the process should stop and exit non-zero."""

    role: str
    reason: str


@dataclass(frozen=True)
class ChildPids:
    """Controller -> RoleSupervisor: the processes of the broker's child actors (role -> pid),
    so a replacement broker starts only once a dead controller's children are gone."""

    pids: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Supervising:
    """RoleSupervisor -> launcher: it runs as process `pid` (the launcher watches that pid)."""

    role: str
    pid: int
