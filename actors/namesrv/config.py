"""The name server's configuration: namesrv.properties names, as `mqnamesrv -c` reads them.

Mirrors common/namesrv/NamesrvConfig.java (+ the NettyServerConfig names a name server uses),
RocketMQ 4.9.x. GET_NAMESRV_CONFIG renders it as properties text; UPDATE_NAMESRV_CONFIG
(DefaultRequestProcessor.updateConfig) changes it at run time, refuses the names in
configBlackList, and persists it to configStorePath (Configuration.persist).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field

from actors.acl.plain_permission_manager import ACL_PLAIN_FILE_PROPERTY, DEFAULT_ACL_FILE
from store.config import PROPERTY, properties_text, property_name, typed_properties

log = logging.getLogger(__name__)


# a remote update may not turn ACL off or move its files
FIXED_AT_START = ("aclEnable", "rocketmqHome", "aclPlainFile")


@dataclass
class NamesrvConfig:
    """NamesrvConfig fields by their Java names (defaults as in 4.9.x, paths under `data`)."""

    rocketmqHome: str = ""
    kvConfigPath: str = ""  # kvConfig.json (put/get KV config, order topic confs)
    configStorePath: str = ""  # where UPDATE_NAMESRV_CONFIG persists (namesrv.properties)
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    scanNotActiveBrokerInterval: int = 10_000  # RouteInfoManager's scan period (ms)
    brokerChannelExpiredTime: int = 120_000  # ours: a silent broker is dropped after (ms)
    listenPort: int = 9876  # NettyServerConfig
    serverChannelMaxIdleTimeSeconds: int = 120  # NettyServerConfig
    maxConnections: int = 10_000  # ours: client connections at most (more: accepted, closed)
    # ours (4.9's name server checks nothing): its write codes need a signed admin account of
    # rocketmqHome's conf/plain_acl.yml (actors.acl.plain_access_validator.NAMESRV_WRITE_CODES)
    aclEnable: bool = False
    # the default ACL file, relative to rocketmqHome: the property rocketmq.acl.plain.file
    aclPlainFile: str = field(default=DEFAULT_ACL_FILE,
                              metadata={PROPERTY: ACL_PLAIN_FILE_PROPERTY})

    @property
    def acl_home(self) -> str:
        """Where the ACL files are read from (rocketmqHome, else $ROCKETMQ_HOME; "" = none)."""
        return self.rocketmqHome or os.environ.get("ROCKETMQ_HOME", "")

    @classmethod
    def from_properties(cls, props: dict[str, str], data_dir: str = "") -> NamesrvConfig:
        """Typed values from properties (unknown names ignored, a bad value raises ValueError);
        empty paths default under data_dir when one is given."""
        cfg = cls(**typed_properties(cls, props))
        if data_dir:
            if not cfg.kvConfigPath:
                cfg.kvConfigPath = os.path.join(data_dir, "namesrv", "kvConfig.json")
            if not cfg.configStorePath:
                cfg.configStorePath = os.path.join(data_dir, "namesrv", "namesrv.properties")
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Raise ValueError for values the name server cannot run with."""
        if self.scanNotActiveBrokerInterval < 1 or self.brokerChannelExpiredTime < 1:
            raise ValueError("scanNotActiveBrokerInterval/brokerChannelExpiredTime: must be > 0")
        if not 0 <= self.listenPort <= 65535:
            raise ValueError(f"listenPort: {self.listenPort} is not a port")
        if self.maxConnections < 1:
            raise ValueError(f"maxConnections: {self.maxConnections} must be > 0")
        if self.aclEnable and not self.acl_home:
            raise ValueError("aclEnable: set rocketmqHome (or ROCKETMQ_HOME) to the directory "
                             f"whose {self.aclPlainFile} holds the accounts")

    def text(self) -> str:
        """All names and values as properties text (Configuration.getAllConfigsFormatString)."""
        return properties_text(self)

    def update(self, props: dict[str, str]) -> list[str]:
        """Apply the known names (all or nothing: a bad value raises ValueError); the unknown
        names, which are ignored as Java's properties2Object ignores them."""
        values = typed_properties(type(self), props)
        names = {f.name: property_name(f) for f in dataclasses.fields(self)}
        for name in FIXED_AT_START:
            if name in values and values[name] != getattr(self, name):
                raise ValueError(f"{names[name]} is read at start only: restart the name server")
        trial = dataclasses.replace(self, **values)
        trial.validate()
        for name, value in values.items():
            setattr(self, name, value)
        return sorted(set(props) - {names[name] for name in values})

    def persist(self) -> None:
        """Write configStorePath atomically (nothing when it is not set)."""
        if not self.configStorePath:
            return
        from store.config_files import write_text_atomic

        write_text_atomic(self.configStorePath, self.text())
