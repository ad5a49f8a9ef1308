"""The rocketmq source's readers: batch and streaming, planned by the SparkBridge.

Mirrors rocketmq-externals RocketMQSource / RocketMQRelation and Spark's kafka010
KafkaMicroBatchStream / KafkaBatch as PySpark Python Data Source readers. The driver side
(partitions, initialOffset, latestOffset, commit) asks the SparkBridge; read() runs on
executors and pulls its range from the broker itself (deploy.spark.pull).

Streaming: the offset is {"topic": {"broker": {"queueId": next offset}}}, end exclusive,
resolved to numbers at the start, so Spark's checkpoint is the only truth on restart.
maxOffsetsPerTrigger is a ReadMaxRows read limit where the installed PySpark has admission
control (4.2+: latestOffset(start, limit), Trigger.AvailableNow); on 4.0 / 4.1 Spark calls
latestOffset() without a start, and the limit is applied from the offsets this reader last
returned or planned (the first micro-batch after a restart from a checkpoint is not limited).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from actors.spark_bridge.options import SourceOptions, parse_source_options
from deploy.spark import bridge_client
from deploy.spark.pull import PullRange, read_range
from protocol.codes import SparkBridgeCode as SC

log = logging.getLogger(__name__)

try:  # PySpark 4.2+: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

except ImportError:  # PySpark 4.0 / 4.1: latestOffset() only, no AvailableNow
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]


class RocketMQPartition(InputPartition):  # type: ignore[misc]
    """One Spark task: its value is the PullRange the bridge planned (picklable)."""

    def __init__(self, value: PullRange) -> None:
        super().__init__(value)


def _partitions(opts: SourceOptions, planned: Sequence[Mapping[str, Any]]
                ) -> list[RocketMQPartition]:  # fmt: skip
    return [RocketMQPartition(PullRange(
        topic=str(p["topic"]), broker=str(p["broker"]), queue_id=int(p["queueId"]),
        addr=str(p["addr"]), start=int(p["start"]), end=int(p["end"]), group=opts.pull_group,
        sub_expression=opts.sub_expression, tags=opts.tags, batch_size=opts.pull_batch_size,
        timeout_ms=opts.pull_timeout_ms, fail_on_data_loss=opts.fail_on_data_loss,
        credentials=opts.credentials, tls=opts.tls))
        for p in planned]  # fmt: skip


class _BridgeUser:
    """What both readers share: the raw options, the parsed ones, the query's identity."""

    def __init__(self, options: Mapping[str, str], *, streaming: bool) -> None:
        self.raw = {str(k): str(v) for k, v in options.items()}
        self.opts = parse_source_options(self.raw, streaming=streaming)
        self.query = {"id": uuid.uuid4().hex, "kind": "stream" if streaming else "batch",
                      "name": self.opts.query_name or ""}  # fmt: skip
        self._bridge: str | None = None

    def ask(self, code: int, **body: Any) -> dict[str, Any]:
        if self._bridge is None:
            self._bridge = bridge_client.find_bridge(self.opts)
        return bridge_client.call(self._bridge, code,
                                  dict(body, options=self.raw, query=self.query),
                                  tls=self.opts.tls)  # fmt: skip


class RocketMQBatchReader(_BridgeUser, DataSourceReader):
    """spark.read.format("rocketmq"): offsets [startingOffsets, endingOffsets) of each queue."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options, streaming=False)

    def partitions(self) -> Sequence[InputPartition]:
        """Asked once on the driver before any task: every error surfaces here."""
        plan = self.ask(SC.SPARK_PLAN_BATCH)
        parts = _partitions(self.opts, plan.get("partitions", []))
        log.info("rocketmq batch read of %s: %d partition(s)", ",".join(self.opts.topics),
                 len(parts))  # fmt: skip
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs on an executor: pull the range from its broker."""
        return read_range(partition.value)


class RocketMQStreamReader(_BridgeUser, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """spark.readStream.format("rocketmq"): micro-batches of per-queue offset ranges."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options, streaming=True)
        self._last_end: dict[str, Any] | None = None  # for PySpark 4.0 / 4.1 (no start given)
        self._latest: dict[str, Any] | None = None
        self._target: dict[str, Any] | None = None  # Trigger.AvailableNow

    def initialOffset(self) -> dict[str, Any]:
        """A new query's start, resolved to numbers by the bridge."""
        offset: dict[str, Any] = self.ask(SC.SPARK_INITIAL_OFFSET)["offset"]
        return offset

    def getDefaultReadLimit(self) -> Any:
        """maxOffsetsPerTrigger as ReadMaxRows (PySpark 4.2+)."""
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: the heads now are the target; nothing beyond is read."""
        self._target = self.ask(SC.SPARK_LATEST_OFFSET, start={}, headsOnly=True)["latest"]
        log.info("rocketmq stream: Trigger.AvailableNow target %s", self._target)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None
                     ) -> dict[str, Any]:  # fmt: skip
        """The end of the next micro-batch (start when nothing new)."""
        if start is None:  # PySpark 4.0 / 4.1 ask latestOffset() with no start and no limit
            start = self._last_end
            max_rows = self.opts.max_offsets_per_trigger
        else:  # 4.2+: the engine's limit (ReadAllAvailable under AvailableNow and once)
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if start is None:  # an old PySpark after a restart: the first batch is not limited
            got = self.ask(SC.SPARK_LATEST_OFFSET, start={}, headsOnly=True)
        else:
            got = self.ask(SC.SPARK_LATEST_OFFSET, start=start, maxRows=max_rows,
                           cap=self._target)  # fmt: skip
        self._latest = got["latest"]
        end: dict[str, Any] = got["offset"]
        self._last_end = end
        return end

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The heads last seen (for the query's progress)."""
        return self._latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One partition per queue range of the micro-batch ([] when nothing new)."""
        self._last_end = end
        if start == end:
            return []
        planned = self.ask(SC.SPARK_PLAN_PARTITIONS, start=start, end=end)["partitions"]
        return _partitions(self.opts, planned)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs on an executor: pull the range from its broker."""
        return read_range(partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark processed everything before `end`: progress and the optional group's offsets
        (monitoring only; the checkpoint stays the truth, so a failure here only logs)."""
        try:
            got = self.ask(SC.SPARK_COMMIT, end=end)
        except bridge_client.RocketMQSourceError as exc:
            log.warning("rocketmq stream: commit not recorded: %s", exc)
            return
        if got.get("failed"):
            log.warning("rocketmq stream: group offsets not committed: %s", got["failed"])

    def stop(self) -> None:
        """The query stopped: detach from the bridge (best effort)."""
        try:
            self.ask(SC.SPARK_DETACH)
        except bridge_client.RocketMQSourceError as exc:
            log.info("rocketmq stream: detach not recorded: %s", exc)
