"""The rocketmq sink: a DataFrame's rows produced to a topic, in batch and streaming queries.

Mirrors rocketmq-externals RocketMQSink / RocketMQWriter (columns body, topic, tags; options
nameServer, topic) and Spark's kafka010 KafkaWriter (a `topic` option overrides the column,
the row's other columns checked before any task runs), with RocketMQ's message parts: keys,
properties, shardingKey (the queue by the key's Java hash, as SelectMessageQueueByHash) and
delayLevel. A row's properties, tags and keys are checked as every producer of the project
checks them (actors.client.validators: no system name such as TAGS or UNIQ_KEY, no null or
blank name or value, no \\x01 / \\x02); a bad row fails its task with a
MessageValidationError naming the row and the property. Each task's sends are acknowledged
before its commit message goes back (deploy.spark.send), so the guarantee is at-least-once: a
retried task or micro-batch sends its rows again, with the same UNIQ_KEY (msgId), derived
from (write id or query id, micro-batch id, partition, row index), so a consumer can
deduplicate by msgId.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)

from actors.client import validators
from actors.runtime.tls import TlsConfig
from actors.spark_bridge.options import (
    ALIASES,
    SourceOptionError,
    credentials_of,
    parse_name_servers,
    parse_topics,
    tls_of,
)
from deploy.spark.send import OutMessage, TaskSender
from protocol.acl import SessionCredentials
from protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
)

log = logging.getLogger(__name__)

try:  # PySpark 4.1+: micro-batches arrive as Arrow record batches too
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase

    _STREAM_ARROW = True
except ImportError:  # 4.0: Rows
    _StreamWriterBase = DataSourceStreamWriter  # type: ignore[misc,assignment]
    _STREAM_ARROW = False

DEFAULT_PRODUCER_GROUP: Final = "spark-rocketmq-sink"
MAX_DELAY_LEVEL: Final = 18  # the broker's default messageDelayLevel has 18 levels
COLUMN_TYPES: Final[dict[str, tuple[str, ...]]] = {
    "body": ("binary", "string"),
    "topic": ("string",),
    "tags": ("string",),
    "keys": ("string", "array<string>"),
    "properties": ("map<string,string>",),
    "shardingKey": ("string",),
    "delayLevel": ("tinyint", "smallint", "int", "bigint"),
}


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """The parsed options of a write."""

    name_servers: tuple[str, ...]
    topic: str | None
    group: str
    timeout_ms: int
    retries: int
    batch_size: int
    max_inflight: int
    credentials: SessionCredentials | None = None  # accessKey / secretKey: sends signed
    tls: TlsConfig | None = None  # useTLS (+ tls.client.*)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """nameServer, topic, producerGroup, sendTimeoutMs, retries, batchSize, maxInFlight,
    accessKey + secretKey (ACL)."""
    o = {ALIASES.get(k.lower(), k.lower()): str(v) for k, v in options.items()}
    topic = o.get("topic")

    def number(name: str, shown: str, default: int, low: int) -> int:
        text = o.get(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise SourceOptionError(f"{shown} {text!r} is not an integer") from None
        if value < low:
            raise SourceOptionError(f"{shown} must be >= {low}, got {value}")
        return value

    return SinkOptions(
        name_servers=parse_name_servers(o.get("nameserver")),
        topic=parse_topics(topic)[0] if topic else None,
        group=o.get("producergroup") or DEFAULT_PRODUCER_GROUP,
        timeout_ms=number("sendtimeoutms", "sendTimeoutMs", 3000, 1),
        retries=number("retries", "retries", 2, 0),
        batch_size=number("batchsize", "batchSize", 64, 1),
        max_inflight=number("maxinflight", "maxInFlight", 16, 1),
        credentials=credentials_of(o), tls=tls_of(o),
    )  # fmt: skip


def check_schema(schema: Any, opts: SinkOptions) -> dict[str, int]:
    """Column name -> position of what the sink uses; SourceOptionError before any task."""
    fields = {f.name: (i, f.dataType.simpleString()) for i, f in enumerate(schema.fields)}
    if "body" not in fields:
        raise SourceOptionError("the rocketmq sink needs a `body` column (binary or string); "
                                f"the DataFrame has {', '.join(fields) or 'no columns'}")
    if opts.topic is None and "topic" not in fields:
        raise SourceOptionError("the rocketmq sink needs a `topic` option or a `topic` column")
    out = {}
    for name, allowed in COLUMN_TYPES.items():
        if name in fields:
            pos, kind = fields[name]
            if kind not in allowed:
                raise SourceOptionError(f"column {name} is {kind}; the rocketmq sink takes "
                                        f"{' or '.join(allowed)}")  # fmt: skip
            out[name] = pos
    return out


def row_key(write_id: str, batch_id: str, partition: int, index: int) -> str:
    """The deterministic UNIQ_KEY of a row: 32 upper-case hex digits like a Java msgId."""
    text = f"{write_id}:{batch_id}:{partition}:{index}".encode()
    return hashlib.blake2b(text, digest_size=16).hexdigest().upper()


def to_message(row: Any, cols: Mapping[str, int], topic: str | None, key: str) -> OutMessage:
    """One row as a message (bad values raise ValueError naming the column)."""
    body = row[cols["body"]]
    if body is None:
        raise ValueError("a row has a null body")
    if isinstance(body, str):
        body = body.encode("utf-8")
    props: dict[str, str] = {}
    if "properties" in cols and row[cols["properties"]]:
        given = row[cols["properties"]]  # a dict (Row) or (key, value) pairs (Arrow)
        for name, value in given.items() if isinstance(given, dict) else given:
            validators.check_user_property(name, value)
            props[name] = value
    props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = key
    props[PROPERTY_WAIT_STORE_MSG_OK] = "true"
    if "tags" in cols and row[cols["tags"]]:
        validators.check_property_text("tags", row[cols["tags"]])
        props[PROPERTY_TAGS] = row[cols["tags"]]
    if "keys" in cols and row[cols["keys"]]:
        keys = row[cols["keys"]]
        text = keys if isinstance(keys, str) else " ".join(k for k in keys if k)
        validators.check_property_text("keys", text)
        props[PROPERTY_KEYS] = text
    if "delayLevel" in cols and row[cols["delayLevel"]]:
        level = int(row[cols["delayLevel"]])
        if not 0 <= level <= MAX_DELAY_LEVEL:
            raise ValueError(f"delayLevel {level} is not in 0..{MAX_DELAY_LEVEL}")
        if level:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    row_topic = topic or (row[cols["topic"]] if "topic" in cols else None)
    if not row_topic:
        raise ValueError("a row has no topic (set the topic option or fill the topic column)")
    sharding = row[cols["shardingKey"]] if "shardingKey" in cols else None
    return OutMessage(str(row_topic), bytes(body), props, sharding or None)


@dataclass
class RocketMQCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one task produced."""

    partition: int
    messages: int
    requests: int
    retries: int


def arrow_rows(batches: Iterator[Any], cols: Mapping[str, int]
               ) -> tuple[dict[str, int], Iterator[tuple[Any, ...]]]:  # fmt: skip
    """Record batches as tuples of the used columns only (one to_pylist per column and
    batch: cheaper than a Row per row), and where each column is in those tuples."""
    names = list(cols)

    def gen() -> Iterator[tuple[Any, ...]]:
        for b in batches:
            yield from zip(*(b.column(cols[n]).to_pylist() for n in names), strict=True)

    return {n: i for i, n in enumerate(names)}, gen()


def _write(opts: SinkOptions, cols: Mapping[str, int], write_id: str,
           rows: Iterator[Any]) -> RocketMQCommitMessage:  # fmt: skip
    """A task: every row sent and acknowledged (rows: Rows, or with cols remapped, tuples)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    partition = tc.partitionId() if tc is not None else 0
    batch_id = (tc.getLocalProperty("streaming.sql.batchId") if tc is not None else None) or ""
    query_id = tc.getLocalProperty("sql.streaming.queryId") if tc is not None else None
    base = query_id or write_id  # a query keeps its id across restarts from its checkpoint
    sender = TaskSender(opts.name_servers, opts.group, timeout_ms=opts.timeout_ms,
                        retries=opts.retries, batch_size=opts.batch_size,
                        max_inflight=opts.max_inflight,
                        credentials=opts.credentials, tls=opts.tls)  # fmt: skip
    where = f"partition {partition}{f' of micro-batch {batch_id}' if batch_id else ''}"

    def messages() -> Iterator[OutMessage]:
        for i, row in enumerate(rows):
            try:
                yield to_message(row, cols, opts.topic, row_key(base, batch_id, partition, i))
            except validators.MessageValidationError as exc:
                raise validators.MessageValidationError(
                    exc.code, f"rocketmq sink: row {i} of {where}: {exc.message}") from None
            except ValueError as exc:
                raise ValueError(f"rocketmq sink: row {i} of {where}: {exc}") from None

    try:
        stats = sender.send_all(messages())
    finally:
        sender.close()
    return RocketMQCommitMessage(partition, stats.messages, stats.requests, stats.retries)


class RocketMQWriter(DataSourceArrowWriter):
    """df.write.format("rocketmq"): each task sends its rows; at-least-once."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.opts = parse_sink_options(options)
        self.cols = check_schema(schema, self.opts)
        self.write_id = uuid.uuid4().hex  # the same in every attempt of every task

    def write(self, iterator: Iterator[Any]) -> RocketMQCommitMessage:
        """Runs on an executor: Arrow record batches in."""
        cols, rows = arrow_rows(iterator, self.cols)
        return _write(self.opts, cols, self.write_id, rows)

    def commit(self, messages: list[Any]) -> None:
        """Every task succeeded."""
        total = sum(m.messages for m in messages if m is not None)
        log.info("rocketmq sink: %d message(s) stored by %d task(s)", total, len(messages))

    def abort(self, messages: list[Any]) -> None:
        """A task failed: what the others stored stays stored (at-least-once)."""
        stored = sum(m.messages for m in messages if m is not None)
        log.warning("rocketmq sink: write failed; %d message(s) of finished tasks are stored and "
                    "a retry sends them again with the same msgId", stored)


class RocketMQStreamWriter(_StreamWriterBase):  # type: ignore[misc,valid-type]
    """writeStream.format("rocketmq"): each micro-batch's rows; at-least-once."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.opts = parse_sink_options(options)
        self.cols = check_schema(schema, self.opts)
        self.write_id = uuid.uuid4().hex  # used only when Spark gives no query id

    def write(self, iterator: Iterator[Any]) -> RocketMQCommitMessage:
        """Runs on an executor: Arrow record batches (PySpark 4.1+) or Rows."""
        if _STREAM_ARROW:
            cols, rows = arrow_rows(iterator, self.cols)
            return _write(self.opts, cols, self.write_id, rows)
        return _write(self.opts, self.cols, self.write_id, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        """A micro-batch is stored."""
        total = sum(m.messages for m in messages if m is not None)
        log.info("rocketmq sink: micro-batch %d stored %d message(s)", batchId, total)

    def abort(self, messages: list[Any], batchId: int) -> None:
        """A micro-batch failed; it will be sent again (same msgIds) when the query resumes."""
        log.warning("rocketmq sink: micro-batch %d failed", batchId)
