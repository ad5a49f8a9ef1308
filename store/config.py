"""Store configuration with RocketMQ's property names.

Mirrors store/config/MessageStoreConfig.java, RocketMQ 4.9.x. Attribute names are the Java
property names (camelCase) so a broker.conf maps onto them one to one; `from_properties`
converts strings to the field types, ignores unknown keys and names the key of a bad value.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Final

log = logging.getLogger(__name__)

ASYNC_FLUSH: Final = "ASYNC_FLUSH"
SYNC_FLUSH: Final = "SYNC_FLUSH"
FLUSH_TYPES: Final = (ASYNC_FLUSH, SYNC_FLUSH)
BROKER_ROLES: Final = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
INDEX_DISPATCH_MODES: Final = ("sync", "tick", "process")

DEFAULT_DELAY_LEVELS: Final = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _physical_memory() -> int:
    """Total physical memory in bytes (fixed fact of the host, not a clock)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def parse_delay_levels(text: str) -> list[int]:
    """Parse '1s 5s 1m ...' into delays in ms (level n is index n-1)."""
    out: list[int] = []
    for tok in text.split():
        unit = tok[-1:]
        if unit not in _UNIT_MS or not tok[:-1].isdigit():
            raise ValueError(f"messageDelayLevel: bad level {tok!r}")
        out.append(int(tok[:-1]) * _UNIT_MS[unit])
    if not out:
        raise ValueError("messageDelayLevel: no levels")
    return out


@dataclass(slots=True)
class StoreConfig:
    """Message store settings; names and defaults follow MessageStoreConfig."""

    storePathRootDir: str = os.path.join(os.path.expanduser("~"), "store")
    # the commit log's directory; "" = <storePathRootDir>/commitlog (Java's default is
    # ~/store/commitlog whatever the root says: set both there, either here)
    storePathCommitLog: str = ""
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300_000 * 20
    maxHashSlotNum: int = 5_000_000
    maxIndexNum: int = 5_000_000 * 4
    maxMsgsNumBatch: int = 64
    messageIndexEnable: bool = True
    messageIndexSafe: bool = False
    flushDiskType: str = ASYNC_FLUSH
    brokerRole: str = "ASYNC_MASTER"
    # a slave corrects a pull's out-of-range offset (nextOffsetCorrection) only when set
    offsetCheckInSlave: bool = False
    flushIntervalCommitLog: int = 500
    flushCommitLogLeastPages: int = 4
    flushCommitLogThoroughInterval: int = 10_000
    flushIntervalConsumeQueue: int = 1000
    flushConsumeQueueLeastPages: int = 2
    flushConsumeQueueThoroughInterval: int = 60_000
    syncFlushTimeout: int = 5000
    fileReservedTime: int = 72  # hours
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    cleanResourceInterval: int = 10_000
    deleteCommitLogFilesInterval: int = 100
    deleteConsumeQueueFilesInterval: int = 100
    destroyMapedFileIntervalForcibly: int = 120_000
    cleanFileForciblyEnable: bool = True
    maxMessageSize: int = 1024 * 1024 * 4
    checkCRCOnRecover: bool = True
    warmMapedFileEnable: bool = True
    flushLeastPagesWhenWarmMapedFile: int = 4096  # SYNC_FLUSH: msync every N pages while warming
    accessMessageInMemoryMaxRatio: int = 40
    maxTransferBytesOnMessageInMemory: int = 256 * 1024
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInDisk: int = 64 * 1024
    maxTransferCountOnMessageInDisk: int = 8
    messageDelayLevel: str = DEFAULT_DELAY_LEVELS
    duplicationEnable: bool = False
    # master-slave replication (MessageStoreConfig names; spec §10)
    haListenPort: int = 0  # 0: listenPort + 1 (Java's BrokerStartup); -1: no HA service
    haMasterAddress: str = ""  # a slave: the master's HA address; "" = learn it at registration
    haSendHeartbeatInterval: int = 5000
    haHousekeepingInterval: int = 20_000
    haTransferBatchSize: int = 32 * 1024
    haSlaveFallbehindMax: int = 256 * 1024 * 1024
    slaveTimeout: int = 3000  # SYNC_MASTER: how long a send waits for a slave
    # Not a RocketMQ name: who builds IndexFile entries. "sync": inside put; "tick": the writer's
    # tick() catches up from the commit log (ReputMessageService style); "process": another
    # process owns the index files (IndexFollower): `python -m store.index_dispatch` started by
    # start(), or, with messageIndexProcessSpawn=false, one its host runs (the broker's
    # IndexService actor). "" (default): the host decides: a bare store uses "sync", the broker
    # "process" (see index_mode).
    messageIndexDispatch: str = ""
    messageIndexProcessSpawn: bool = True
    # Not RocketMQ names: facts the Java store reads from the JVM / OS.
    totalPhysicalMemory: int = field(default_factory=_physical_memory)
    # Java's system properties -Drocketmq.broker.diskSpaceWarningLevelRatio=0.90 (the disk
    # check marks the store full above it: sends refused) and ...CleanForciblyRatio=0.85 (any
    # commit-log file may be deleted above it, cleanFileForciblyEnable). As percents under these
    # names; broker.conf takes Java's names and fractions too (JAVA_SYSTEM_PROPERTIES).
    diskSpaceWarningLevelRatio: float = 90.0
    diskSpaceCleanForciblyRatio: float = 85.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad setting."""
        if self.flushDiskType not in FLUSH_TYPES:
            raise ValueError(
                f"flushDiskType: expected one of {FLUSH_TYPES}, got {self.flushDiskType!r}"
            )
        if self.brokerRole not in BROKER_ROLES:
            raise ValueError(f"brokerRole: expected one of {BROKER_ROLES}, got {self.brokerRole!r}")
        if self.messageIndexDispatch not in ("", *INDEX_DISPATCH_MODES):
            raise ValueError(
                f"messageIndexDispatch: expected one of {INDEX_DISPATCH_MODES}, "
                f"got {self.messageIndexDispatch!r}"
            )
        if self.mappedFileSizeCommitLog < 4096:
            raise ValueError("mappedFileSizeCommitLog: must be at least 4096")
        if self.mappedFileSizeConsumeQueue < 20 or self.mappedFileSizeConsumeQueue % 20:
            raise ValueError("mappedFileSizeConsumeQueue: must be a positive multiple of 20")
        if self.maxHashSlotNum < 1 or self.maxIndexNum < 2:
            raise ValueError("maxHashSlotNum/maxIndexNum: must be positive")
        if not 0 < self.diskMaxUsedSpaceRatio <= 100:
            raise ValueError("diskMaxUsedSpaceRatio: must be in (0, 100]")
        for name in ("diskSpaceWarningLevelRatio", "diskSpaceCleanForciblyRatio"):
            if not 1 < getattr(self, name) <= 100:
                raise ValueError(
                    f"{name}: a percent in (1, 100], got {getattr(self, name)} (Java's fraction"
                    f" goes under rocketmq.broker.{name})"
                )
        for part in self.deleteWhen.split(";"):
            if not part.strip().isdigit() or not 0 <= int(part) <= 23:
                raise ValueError(f"deleteWhen: bad hour {part!r}")
        parse_delay_levels(self.messageDelayLevel)

    @property
    def commitlog_path(self) -> str:
        """Where the commit-log files are (storePathCommitLog, else under the root)."""
        return os.path.expanduser(self.storePathCommitLog) if self.storePathCommitLog else (
            os.path.join(self.storePathRootDir, "commitlog"))  # fmt: skip

    @property
    def index_mode(self) -> str:
        """The effective index dispatch mode: "off", "sync", "tick" or "process"."""
        if not self.messageIndexEnable:
            return "off"
        return self.messageIndexDispatch or "sync"

    @property
    def delay_levels_ms(self) -> list[int]:
        """Delay of each level in ms (index = level - 1)."""
        return parse_delay_levels(self.messageDelayLevel)

    @property
    def is_sync_flush(self) -> bool:
        """True for SYNC_FLUSH."""
        return self.flushDiskType == SYNC_FLUSH

    @classmethod
    def from_properties(cls, props: dict[str, str], **overrides: Any) -> StoreConfig:
        """Build from string properties; unknown keys ignored, bad values raise ValueError.
        Java's system properties (JAVA_SYSTEM_PROPERTIES) are taken under their own names."""
        kwargs = typed_properties(cls, props)
        for key, name in JAVA_SYSTEM_PROPERTIES.items():
            if key in props:
                kwargs[name] = _fraction_percent(key, props[key])
        kwargs.update(overrides)
        return cls(**kwargs)


# -Dname=value of the Java broker that broker.conf takes under the same name -> field
JAVA_SYSTEM_PROPERTIES: Final = {
    "rocketmq.broker.diskSpaceWarningLevelRatio": "diskSpaceWarningLevelRatio",
    "rocketmq.broker.diskSpaceCleanForciblyRatio": "diskSpaceCleanForciblyRatio",
}


def _fraction_percent(key: str, raw: str) -> float:
    """Java's ratio (Double.parseDouble of "0.90") as a percent."""
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"{key}: expected a number, got {raw!r}") from None
    if not 0.01 < value <= 1.0:
        raise ValueError(f"{key}: a fraction in (0.01, 1.0], got {raw!r}")
    return round(value * 100, 6)


def parse_properties_text(text: str) -> dict[str, str]:
    """Java properties text (MixAll.string2Properties): `key=value` or `key: value` lines, `#`/`!`
    comments, trailing-backslash continuations; later keys win."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if pending:
            line = pending + line
            pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = len(line)
        for i, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                cut = i
                break
        key = line[:cut].strip()
        value = line[cut:].lstrip()
        if value[:1] in ("=", ":"):
            value = value[1:].lstrip()
        if key:
            props[key] = value
    return props


def _property_key(line: str) -> str:
    """The key of a properties line as parse_properties_text reads it ("" for none)."""
    for i, ch in enumerate(line):
        if ch in "=:" or ch.isspace():
            return line[:i]
    return line


def update_properties_text(text: str, updates: dict[str, str]) -> str:
    """`text` (a properties file) with each key of `updates` set: its lines (and their
    continuation lines) replaced in place by `key=value`, keys it lacks appended; comments,
    blank lines and every other line kept as they were (Configuration.persist rewrites the whole
    file; this keeps what its author wrote)."""
    out: list[str] = []
    done: set[str] = set()
    continued = dropping = False  # the last line went on (trailing backslash); and was replaced
    for raw in text.splitlines(keepends=True):
        line = raw.strip()
        if continued:  # part of the line before it, never a key of its own
            continued = line.endswith("\\") and not line.endswith("\\\\")
            if not dropping:
                out.append(raw)
            continue
        key = "" if not line or line[0] in "#!" else _property_key(line)
        continued = bool(key) and line.endswith("\\") and not line.endswith("\\\\")
        dropping = key in updates
        if not dropping:
            out.append(raw)
        elif key not in done:
            out.append(f"{key}={updates[key]}\n")
            done.add(key)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    out.extend(f"{k}={v}\n" for k, v in updates.items() if k not in done)
    return "".join(out)


PROPERTY: Final = "property"  # field metadata: the property name, when not the field's own


def property_name(f: dataclasses.Field[Any]) -> str:
    """The property a config field is read from and written as: its name, or the name its
    metadata gives (a dotted name Java reads as a system property, e.g.
    rocketmq.acl.plain.file)."""
    return str(f.metadata.get(PROPERTY, f.name))


def properties_text(*configs: Any) -> str:
    """MixAll.properties2String of config dataclasses: `name=value` lines (booleans as
    true/false, None left out), in field order."""
    lines = []
    for cfg in configs:
        if dataclasses.is_dataclass(cfg):
            for f in dataclasses.fields(cfg):
                v = getattr(cfg, f.name)
                if v is not None:
                    text = ("true" if v else "false") if isinstance(v, bool) else str(v)
                    lines.append(f"{property_name(f)}={text}\n")
    return "".join(lines)


def typed_properties(cls: Any, props: dict[str, str]) -> dict[str, Any]:
    """The dataclass fields of cls found in props (by property_name), converted to their types
    (ValueError names the key), keyed by field name; unknown keys are ignored. Shared by
    StoreConfig and the broker's and name server's configs."""
    out = {}
    for f in dataclasses.fields(cls):
        name = property_name(f)
        if name in props:
            out[f.name] = _convert(name, f.type, str(props[name]).strip())
    return out


def _convert(name: str, typ: object, raw: str) -> object:
    """Convert one property string to the field's type."""
    t = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
    if t == "bool":
        low = raw.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ValueError(f"{name}: expected true/false, got {raw!r}")
    if t == "int":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{name}: expected an integer, got {raw!r}") from None
    if t == "float":
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f"{name}: expected a number, got {raw!r}") from None
    return raw
