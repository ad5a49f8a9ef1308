"""Options of the `rocketmq` Spark source, parsed the same way by the driver and the bridge.

Mirrors rocketmq-externals rocketmq-spark RocketMQConf / RocketMQSourceProvider (the option
names nameServer, topic, subExpression, pullBatchSize and the offsets JSON keyed
topic -> broker -> queueId) and Spark's KafkaSourceProvider (startingOffsets / endingOffsets
with -2 = earliest and -1 = latest, startingTimestamp / endingTimestamp, minPartitions,
maxRecordsPerPartition, maxOffsetsPerTrigger, failOnDataLoss), and RocketMQ's ACL keys
(accessKey, secretKey: every request signed). Option names are matched
case-insensitively, as Spark does; values arrive as strings. Anything that does not parse
raises SourceOptionError naming the option, before a single request is sent.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from actors.runtime.tls import TlsConfig
from protocol.acl import SessionCredentials

log = logging.getLogger(__name__)

EARLIEST: Final = -2  # offsets JSON: the queue's min offset
LATEST: Final = -1  # offsets JSON: the queue's max offset (the next to be written)
DEFAULT_MAX_RECORDS_PER_PARTITION: Final = 1_000_000
DEFAULT_PULL_BATCH_SIZE: Final = 32  # DefaultMQPullConsumer / the old connector's pullBatchSize
DEFAULT_PULL_TIMEOUT_MS: Final = 10_000
DEFAULT_PULL_GROUP: Final = "spark-rocketmq-source"
MAX_PULL_BATCH_SIZE: Final = 1024

# topic -> brokerName -> queueId (decimal string) -> offset, as Spark offsets and options carry it
Offsets = dict[str, dict[str, dict[str, int]]]

_VALID_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")  # TopicValidator.VALID_PATTERN_STR

# every option name the source reads (lower case), with its aliases
ALIASES: Final[dict[str, str]] = {"namesrvaddr": "nameserver", "subscribe": "topic"}
KNOWN: Final = frozenset({
    "nameserver", "topic", "subexpression", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "minpartitions", "maxrecordsperpartition",
    "maxoffsetspertrigger", "failondataloss", "groupid", "pullbatchsize", "pulltimeoutms",
    "bridge", "queryname", "path", "accesskey", "secretkey", "usetls",
    "tls.test.mode.enable", "tls.client.authserver", "tls.client.trustcertpath",
    "tls.client.certpath", "tls.client.keypath", "tls.client.keypassword",
})  # fmt: skip
# the TLS options by their lower-cased names -> TlsSystemConfig's (Java) names
_TLS_OPTIONS: Final = {
    "tls.test.mode.enable": "tls.test.mode.enable", "tls.client.authserver":
    "tls.client.authServer", "tls.client.trustcertpath": "tls.client.trustCertPath",
    "tls.client.certpath": "tls.client.certPath", "tls.client.keypath": "tls.client.keyPath",
    "tls.client.keypassword": "tls.client.keyPassword",
}  # fmt: skip


class SourceOptionError(ValueError):
    """An option of the rocketmq source is missing or does not parse."""


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The parsed options of one read (batch or streaming)."""

    name_servers: tuple[str, ...]
    topics: tuple[str, ...]
    sub_expression: str = "*"
    tags: frozenset[str] | None = None  # None: every message ("*")
    starting: str | Offsets = "earliest"  # "earliest" | "latest" | offsets JSON
    ending: str | Offsets = "latest"  # batch only
    starting_timestamp: int | None = None  # ms; takes precedence over startingOffsets
    ending_timestamp: int | None = None  # ms; takes precedence over endingOffsets
    min_partitions: int | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    group_id: str | None = None
    pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE
    pull_timeout_ms: int = DEFAULT_PULL_TIMEOUT_MS
    bridge: str | None = None  # host:port; None = as registered on the name server
    query_name: str | None = None
    streaming: bool = False
    credentials: SessionCredentials | None = None  # accessKey / secretKey: requests signed
    tls: TlsConfig | None = None  # useTLS (+ tls.client.*): TLS to the cluster and the bridge

    @property
    def pull_group(self) -> str:
        """The consumerGroup of the executors' pulls (no offsets are committed by them)."""
        return self.group_id or DEFAULT_PULL_GROUP


def normalize(options: Mapping[str, str]) -> dict[str, str]:
    """Lower-cased option names with aliases folded; values as strings."""
    out: dict[str, str] = {}
    for k, v in options.items():
        name = ALIASES.get(k.lower(), k.lower())
        if name in out:
            raise SourceOptionError(f"option {k!r} given twice (or with its alias)")
        out[name] = str(v)
    return out


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Parse and check the reader options; SourceOptionError names the first bad one."""
    o = normalize(options)
    unknown = sorted(set(o) - KNOWN)
    if unknown:
        log.warning("rocketmq source: ignoring unknown options %s", ", ".join(unknown))
    name_servers = parse_name_servers(o.get("nameserver"))
    topics = parse_topics(o.get("topic"))
    sub = (o.get("subexpression") or "*").strip()
    tags = parse_tags(sub)
    default_start = "latest" if streaming else "earliest"
    starting = _offsets_option(o, "startingoffsets", default_start, topics, ending=False,
                               streaming=streaming)  # fmt: skip
    ending: str | Offsets = "latest"
    if streaming:
        for name in ("endingoffsets", "endingtimestamp"):
            if name in o:
                raise SourceOptionError(f"{_display(name)} is for batch reads only; a "
                                        "streaming query reads until it is stopped")
    else:
        ending = _offsets_option(o, "endingoffsets", "latest", topics, ending=True,
                                 streaming=False)  # fmt: skip
    start_ts = _timestamp(o, "startingtimestamp")
    end_ts = _timestamp(o, "endingtimestamp")
    if start_ts is not None and end_ts is not None and end_ts <= start_ts:
        raise SourceOptionError(
            f"endingTimestamp {end_ts} must be after startingTimestamp {start_ts}")
    group = o.get("groupid") or None
    if group is not None and not _VALID_NAME.match(group):
        raise SourceOptionError(f"groupId {group!r}: only letters, digits, %, |, - and _ "
                                "(at most 127)")  # fmt: skip
    bridge = o.get("bridge") or None
    if bridge is not None:
        check_addr(bridge, "bridge")
    return SourceOptions(
        name_servers=name_servers, topics=topics, sub_expression=sub, tags=tags,
        starting=starting, ending=ending, starting_timestamp=start_ts, ending_timestamp=end_ts,
        min_partitions=_int(o, "minpartitions", None, 1),
        max_records_per_partition=_int(o, "maxrecordsperpartition",
                                       DEFAULT_MAX_RECORDS_PER_PARTITION, 1) or 1,
        max_offsets_per_trigger=_int(o, "maxoffsetspertrigger", None, 1),
        fail_on_data_loss=_bool(o, "failondataloss", True),
        group_id=group,
        pull_batch_size=_int(o, "pullbatchsize", DEFAULT_PULL_BATCH_SIZE, 1,
                             MAX_PULL_BATCH_SIZE) or DEFAULT_PULL_BATCH_SIZE,
        pull_timeout_ms=_int(o, "pulltimeoutms", DEFAULT_PULL_TIMEOUT_MS, 1)
        or DEFAULT_PULL_TIMEOUT_MS,
        bridge=bridge, query_name=o.get("queryname") or None, streaming=streaming,
        credentials=credentials_of(o), tls=tls_of(o),
    )  # fmt: skip


def tls_of(options: Mapping[str, str]) -> TlsConfig | None:
    """useTLS=true (Java's -Dtls.enable=true) with the tls.client.* / tls.test.mode.enable
    options (TlsSystemConfig's names; /etc/rocketmq/tls.properties as Java reads it); None
    when useTLS is not set. Names matched case-insensitively; the key password never shown."""
    o = {k.lower(): v for k, v in options.items()}
    raw = (o.get("usetls") or "false").strip().lower()
    if raw not in ("true", "false"):
        raise SourceOptionError(f"useTLS: expected true or false, got {raw!r}")
    if raw == "false":
        return None
    props = {java: str(o[low]) for low, java in _TLS_OPTIONS.items() if low in o}
    props["tls.enable"] = "true"
    try:
        return TlsConfig.from_properties(props)
    except (ValueError, OSError) as exc:
        raise SourceOptionError(str(exc)) from None


def credentials_of(options: Mapping[str, str]) -> SessionCredentials | None:
    """accessKey + secretKey (ACL: every request to a name server or broker is signed as
    AclClientRPCHook signs it); one without the other is a SourceOptionError. Names matched
    case-insensitively; the secret is never shown."""
    o = {k.lower(): v for k, v in options.items()}
    ak, sk = o.get("accesskey") or None, o.get("secretkey") or None
    if (ak is None) != (sk is None):
        raise SourceOptionError("accessKey and secretKey go together (ACL credentials)")
    return None if ak is None or sk is None else SessionCredentials(ak, sk)


def check_addr(text: str, option: str) -> str:
    """A host:port, or SourceOptionError naming the option."""
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SourceOptionError(f"{option} {text!r} is not host:port")
    return text.strip()


def parse_name_servers(text: str | None) -> tuple[str, ...]:
    """nameServer: host:port[;host:port...] (RocketMQ's namesrvAddr form)."""
    if not text or not text.strip():
        raise SourceOptionError("nameServer is required (host:port of a RocketMQ name server; "
                                "several separated by ';')")  # fmt: skip
    return tuple(check_addr(a, "nameServer") for a in text.split(";") if a.strip())


def parse_topics(text: str | None) -> tuple[str, ...]:
    """topic: one topic or a comma list (each a valid RocketMQ topic name)."""
    if not text or not text.strip():
        raise SourceOptionError("topic is required (one topic or a comma list)")
    topics = tuple(dict.fromkeys(t.strip() for t in text.split(",")))
    for t in topics:
        if not _VALID_NAME.match(t):
            raise SourceOptionError(f"topic {t!r} is not a valid RocketMQ topic name "
                                    "(letters, digits, %, |, - and _; at most 127)")
    return topics


def parse_tags(sub_expression: str) -> frozenset[str] | None:
    """A TAG subscription expression ("*", "a", "a || b") as its tag set; None for all."""
    if sub_expression in ("", "*"):
        return None
    tags = frozenset(t.strip() for t in sub_expression.split("||") if t.strip())
    if not tags:
        raise SourceOptionError(f"subExpression {sub_expression!r} names no tag")
    return tags


def _display(name: str) -> str:
    for proper in ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
                   "minPartitions", "maxRecordsPerPartition", "maxOffsetsPerTrigger",
                   "failOnDataLoss", "pullBatchSize", "pullTimeoutMs"):  # fmt: skip
        if proper.lower() == name:
            return proper
    return name


def _offsets_option(o: Mapping[str, str], name: str, default: str, topics: tuple[str, ...],
                    *, ending: bool, streaming: bool) -> str | Offsets:  # fmt: skip
    text = o.get(name, default).strip()
    shown = _display(name)
    if text in ("earliest", "latest"):
        if ending and text == "earliest":
            raise SourceOptionError(f"{shown}=earliest is not allowed (an empty read)")
        if not ending and not streaming and text == "latest":
            raise SourceOptionError(f"{shown}=latest is not allowed for a batch read "
                                    "(it would read nothing)")  # fmt: skip
        return text
    return parse_offsets_json(text, shown, topics, ending=ending, streaming=streaming)


def parse_offsets_json(text: str, option: str, topics: tuple[str, ...], *, ending: bool,
                       streaming: bool) -> Offsets:  # fmt: skip
    """{"topic": {"broker": {"queueId": offset}}} with -2 earliest, -1 latest."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise SourceOptionError(
            f"{option} is neither earliest, latest nor offsets JSON "
            f'{{"topic": {{"broker": {{"queueId": offset}}}}}}: {exc}') from None
    if not isinstance(raw, dict) or not raw:
        raise SourceOptionError(f'{option} JSON must be an object {{"topic": {{...}}}}')
    out: Offsets = {}
    for topic, brokers in raw.items():
        if topic not in topics:
            raise SourceOptionError(f"{option} names topic {topic!r}, which is not in the "
                                    f"topic option ({','.join(topics)})")  # fmt: skip
        if not isinstance(brokers, dict):
            raise SourceOptionError(f'{option}: topic {topic!r} must map to {{"broker": '
                                    '{"queueId": offset}}')  # fmt: skip
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise SourceOptionError(f"{option}: {topic}/{broker} must map queue ids to "
                                        "offsets")  # fmt: skip
            for qid, off in queues.items():
                if not (isinstance(qid, str) and qid.isdigit()):
                    raise SourceOptionError(f"{option}: queue id {qid!r} of {topic}/{broker} "
                                            "is not a non-negative integer")  # fmt: skip
                if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
                    raise SourceOptionError(
                        f"{option}: offset {off!r} of {topic}/{broker}/{qid} must be an "
                        "integer >= 0, or -2 (earliest) or -1 (latest)")
                if ending and off == EARLIEST:
                    raise SourceOptionError(f"{option}: -2 (earliest) is not allowed as an end "
                                            f"({topic}/{broker}/{qid})")  # fmt: skip
                if not ending and not streaming and off == LATEST:
                    raise SourceOptionError(f"{option}: -1 (latest) is not allowed as a batch "
                                            f"start ({topic}/{broker}/{qid})")  # fmt: skip
                out.setdefault(topic, {}).setdefault(broker, {})[str(int(qid))] = off
    return out


def _timestamp(o: Mapping[str, str], name: str) -> int | None:
    text = o.get(name)
    if text is None or not text.strip():
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise SourceOptionError(f"{_display(name)} {text!r} is not milliseconds since the "
                                "epoch") from None  # fmt: skip
    if value < 0:
        raise SourceOptionError(f"{_display(name)} must be >= 0, got {value}")
    return value


def _int(o: Mapping[str, str], name: str, default: int | None, low: int,
         high: int | None = None) -> int | None:  # fmt: skip
    text = o.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise SourceOptionError(f"{_display(name)} {text!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise SourceOptionError(f"{_display(name)} must be {bound}, got {value}")
    return value


def _bool(o: Mapping[str, str], name: str, default: bool) -> bool:
    text = o.get(name)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise SourceOptionError(f"{_display(name)} must be true or false, got {text!r}")
    return text.strip().lower() == "true"
