"""Broker settings under RocketMQ's property names.

Mirrors common/BrokerConfig.java, RocketMQ 4.9.x (plus brokerRole from MessageStoreConfig and a
few names of our own, marked below). Attribute names are the camelCase property names so a
RocketMQ broker.conf reads unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from actors.acl.plain_permission_manager import ACL_PLAIN_FILE_PROPERTY, DEFAULT_ACL_FILE
from store.config import PROPERTY, StoreConfig, property_name, typed_properties

log = logging.getLogger(__name__)

MASTER_ID = 0


@dataclass(slots=True)
class BrokerConfig:
    """Broker-level configuration (RocketMQ property names)."""

    brokerClusterName: str = "DefaultCluster"
    brokerName: str = "broker-a"
    brokerId: int = 0
    namesrvAddr: str = ""  # "host:port;host:port"
    listenPort: int = 10911
    fastListenPort: int | None = None  # ours: VIP port; None = listenPort - 2 (BrokerStartup)
    brokerIP1: str = "127.0.0.1"
    brokerIP2: str = ""  # HA address host; empty => brokerIP1
    brokerRole: str = "ASYNC_MASTER"  # ASYNC_MASTER | SYNC_MASTER | SLAVE
    autoCreateTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    defaultTopicQueueNums: int = 8
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    waitTimeMillsInSendQueue: int = 200
    waitTimeMillsInPullQueue: int = 5000
    waitTimeMillsInHeartbeatQueue: int = 31000
    waitTimeMillsInTransactionQueue: int = 3000
    waitTimeMillsInOtherQueue: int = 3000  # ours: consumer_manage, query, admin groups
    registerNameServerPeriod: int = 30000
    registerBrokerTimeoutMills: int = 6000
    flushConsumerOffsetInterval: int = 5000
    disableConsumeIfConsumerReadSlowly: bool = False
    consumerFallbehindThreshold: int = 17179869184
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    traceTopicEnable: bool = False
    msgTraceTopicName: str = "RMQ_SYS_TRACE_TOPIC"
    regionId: str = "DefaultRegion"
    traceOn: bool = True
    storeReplyMessageEnable: bool = True  # a reply message is also stored in its reply topic
    configBlackList: str = "configBlackList;brokerConfigPath"  # names UPDATE_BROKER_CONFIG refuses
    # every client request checked against plain_acl.yml's accounts (actors.acl), read
    # from rocketmqHome's conf/ (Java: -Drocketmq.home.dir or $ROCKETMQ_HOME)
    aclEnable: bool = False
    rocketmqHome: str = ""  # "" = $ROCKETMQ_HOME
    # the default ACL file, relative to rocketmqHome: the property rocketmq.acl.plain.file
    # (Java's -Drocketmq.acl.plain.file); conf/acl/*.yml are read beside it
    aclPlainFile: str = field(default=DEFAULT_ACL_FILE,
                              metadata={PROPERTY: ACL_PLAIN_FILE_PROPERTY})
    enableDLegerCommitLog: bool = False  # DLedger mode is not built: true is refused at start
    brokerPermission: int = 6
    rejectTransactionMessage: bool = False
    transactionTimeOut: int = 6000  # a half message older than this (ms) is checked
    transactionCheckMax: int = 15  # checks before a half message is discarded
    transactionCheckInterval: int = 60000  # TransactionalMessageCheckService period (ms)
    channelExpiredTimeout: int = 120000
    notifyConsumerIdsChangedEnable: bool = True
    slaveReadEnable: bool = False
    enablePropertyFilter: bool = False
    defaultQueryMaxNum: int = 32
    forceRegister: bool = True
    compressedRegister: bool = False
    # ours: how processor channels travel: "unix" (a socket file per group under the runtime
    # dir, mode 0600: the default on one host) or "tcp" (a port per group on
    # processorChannelHost: the transport a processor on another host would use). Channels
    # carry request records and pickled state events, so a TCP channel only accepts a
    # connection that first sends the broker's random 32-byte token; keep the host on loopback
    # or a private network all the same (the token travels in clear)
    # ours (RocketMQ 4.9.x has no such limit): client connections the RemotingServer keeps
    # open at most, per port; one more is accepted and closed at once (logged, rate-limited)
    maxConnections: int = 10_000
    # ours: the pull actor writes its answers to a client's socket itself (direct replies) only
    # for clients on other hosts; a client on this host is answered by the RemotingServer. The
    # kernel moves a woken task onto its waker's CPU when that CPU runs nothing else: written
    # by the busy pull actor, a local consumer shared its CPU and C ran at 0.7x the rate it
    # reaches when the light RemotingServer writes (2 CPUs). true: direct for every client
    directReplyToLocalClients: bool = False
    processorChannel: str = "unix"
    processorChannelHost: str = "127.0.0.1"
    # the file UPDATE_BROKER_CONFIG persists to and the next start reads (BrokerPathConfigHelper:
    # the -c file; "" = <storePathRootDir>/config/broker.properties); in configBlackList
    brokerConfigPath: str = ""

    @property
    def acl_home(self) -> str:
        """Where the ACL files are read from (rocketmqHome, else $ROCKETMQ_HOME; "" = none)."""
        return self.rocketmqHome or os.environ.get("ROCKETMQ_HOME", "")

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> BrokerConfig:
        """Build from a properties dict: typed conversion, unknown keys ignored, then the
        whole-config rules (validated)."""
        return cls(**cls.typed_values(props)).validated()

    @classmethod
    def typed_values(cls, props: dict[str, str]) -> dict[str, Any]:
        """Each known property converted to its field's type, each value checked on its own
        (ValueError naming the key); a partial set, as UPDATE_BROKER_CONFIG sends, is fine."""
        values = typed_properties(cls, props)
        fast = values.get("fastListenPort")
        if isinstance(fast, str):  # `int | None` is not one of typed_properties' types
            try:
                values["fastListenPort"] = int(fast) if fast else None
            except ValueError:
                raise ValueError(f"fastListenPort: expected an integer, got {fast!r}") from None
        if "processorChannel" in values:
            channel = str(values["processorChannel"]).lower()
            if channel not in ("unix", "tcp"):
                raise ValueError(f"processorChannel: expected unix or tcp, got {channel!r}")
            values["processorChannel"] = channel
        return values

    def validated(self) -> BrokerConfig:
        """The rules on the whole config (BrokerStartup's): what actormq does not do is
        refused, a SLAVE needs brokerId > 0 and a master's brokerId is 0; ValueError names it."""
        if self.aclEnable and not self.acl_home:
            raise ValueError("aclEnable: set rocketmqHome (or ROCKETMQ_HOME) to the directory "
                             f"whose {self.aclPlainFile} holds the accounts")
        if self.enableDLegerCommitLog:
            raise ValueError("enableDLegerCommitLog: DLedger mode is not supported by actormq; "
                             "use brokerRole ASYNC_MASTER / SYNC_MASTER / SLAVE")
        if self.maxConnections < 1:
            raise ValueError(f"maxConnections: {self.maxConnections} must be > 0")
        if self.is_slave:
            if self.brokerId <= 0:
                raise ValueError("brokerId: a SLAVE's brokerId must be > 0")
            return self
        return self if self.brokerId == 0 else self.replace(brokerId=0)

    def replace(self, **changes: Any) -> BrokerConfig:
        """Copy with some attributes changed."""
        return dataclasses.replace(self, **changes)

    @property
    def broker_addr(self) -> str:
        """The address clients use: brokerIP1:listenPort."""
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def namesrv_addrs(self) -> list[str]:
        """The name server addresses, split on ';'."""
        return [a.strip() for a in self.namesrvAddr.split(";") if a.strip()]

    @property
    def is_slave(self) -> bool:
        """True for brokerRole SLAVE."""
        return self.brokerRole.upper() == "SLAVE"


# Read when the broker starts (ports, names, paths, roles, the store's layout): an update is
# persisted but takes effect at the next start, as in RocketMQ.
RESTART_ONLY: frozenset[str] = frozenset({
    "brokerClusterName", "brokerName", "brokerId", "listenPort", "fastListenPort", "brokerIP1",
    "brokerIP2", "brokerRole", "storePathRootDir", "storePathCommitLog", "mappedFileSizeCommitLog",
    "mappedFileSizeConsumeQueue", "flushDiskType", "processorChannel", "processorChannelHost",
    "messageIndexDispatch", "maxHashSlotNum", "maxIndexNum", "maxConnections",
    "directReplyToLocalClients", "aclEnable", "rocketmqHome", ACL_PLAIN_FILE_PROPERTY,
})  # fmt: skip


def broker_config_path(broker_config: BrokerConfig, store_config: StoreConfig) -> str:
    """The file UPDATE_BROKER_CONFIG persists to: brokerConfigPath, else
    <storePathRootDir>/config/broker.properties."""
    if broker_config.brokerConfigPath:
        return broker_config.brokerConfigPath
    root = os.path.expanduser(store_config.storePathRootDir or ".")
    return os.path.join(root, "config", "broker.properties")


def split_config_updates(
    props: dict[str, str], store_config_cls: type[StoreConfig]
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(broker updates, store updates: by field name, converted to the field types; the
    unknown property names); ValueError (naming the key) for a value of the wrong type."""
    broker_fields = {property_name(f) for f in dataclasses.fields(BrokerConfig)}
    store_fields = {property_name(f) for f in dataclasses.fields(store_config_cls)}
    unknown = sorted(k for k in props if k not in broker_fields and k not in store_fields)
    b_vals = BrokerConfig.typed_values({k: v for k, v in props.items() if k in broker_fields})
    s_vals = typed_properties(store_config_cls,
                              {k: v for k, v in props.items() if k in store_fields})  # fmt: skip
    return b_vals, s_vals, unknown


def apply_config_updates(broker_config: BrokerConfig, store_config: StoreConfig,
                         updates: tuple[tuple[str, str], ...]) -> bool:  # fmt: skip
    """Set each (key, text) on the broker or store config it belongs to; True if any changed.
    Names read only at start (RESTART_ONLY) are left as the running broker has them: they are
    persisted for the next start (a listenPort set now would be advertised before anything
    listens there)."""
    props = {k: v for k, v in updates if k not in RESTART_ONLY}
    changed = False
    try:
        b_vals, s_vals, _ = split_config_updates(props, type(store_config))
    except ValueError:
        log.warning("config update refused: %s", props)
        return False
    targets: tuple[tuple[object, dict[str, Any]], ...] = ((broker_config, b_vals),
                                                          (store_config, s_vals))  # fmt: skip
    for target, vals in targets:
        for k, v in vals.items():  # names split_config_updates found among target's fields
            if getattr(target, k) != v:
                setattr(target, k, v)
                changed = True
    return changed
