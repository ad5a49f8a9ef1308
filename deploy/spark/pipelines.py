"""Pipelines shipped with actormq, run with `actormq spark run <name>`.

tag-counts: per minute (of storeTimestamp, or bornTimestamp) and tag, the messages and body
bytes of a topic, written to Parquet and, one message per (minute, tag), to a result topic.
It mirrors nothing
in RocketMQ; it is the example of reading and writing topics with the `rocketmq` data source,
in batch (a range of offsets) or streaming (a watermark closes each minute, then it is
written once).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TagCountsJob:
    """What `actormq spark run tag-counts` was asked to do."""

    name_server: str
    topic: str
    result_topic: str | None
    parquet: str | None
    starting_offsets: str = "earliest"
    ending_offsets: str = "latest"
    sub_expression: str = "*"
    bridge: str | None = None
    mode: str = "overwrite"  # Parquet save mode of a batch run
    stream: bool = False
    checkpoint: str | None = None
    trigger: str = "available-now"  # or a processing-time interval such as "10 seconds"
    lateness: str = "1 minute"  # how late a message may arrive and still be counted
    max_offsets_per_trigger: int | None = None
    time_column: str = "storeTimestamp"  # or bornTimestamp (the producer's clock)


def source_options(job: TagCountsJob) -> dict[str, str]:
    """The rocketmq read options of the job."""
    opts = {"nameServer": job.name_server, "topic": job.topic, "subExpression": job.sub_expression,
            "startingOffsets": job.starting_offsets}  # fmt: skip
    if not job.stream:
        opts["endingOffsets"] = job.ending_offsets
    elif job.max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(job.max_offsets_per_trigger)
    if job.bridge:
        opts["bridge"] = job.bridge
    return opts


def tag_counts(df: Any, *, windowed: bool = False, time_column: str = "storeTimestamp") -> Any:
    """minute, tag, messages, bytes (a streaming frame needs windowed=True for its watermark)."""
    from pyspark.sql import functions as F

    if windowed:
        minute = F.window(time_column, "1 minute")
        return (df.groupBy(minute.alias("w"), F.col("tags").alias("tag"))
                .agg(F.count(F.lit(1)).alias("messages"), F.sum(F.length("body")).alias("bytes"))
                .select(F.col("w.start").alias("minute"), "tag", "messages", "bytes"))
    return (df.groupBy(F.date_trunc("minute", time_column).alias("minute"),
                       F.col("tags").alias("tag"))
            .agg(F.count(F.lit(1)).alias("messages"), F.sum(F.length("body")).alias("bytes")))


def as_messages(counts: Any) -> Any:
    """One result message per row: a JSON body, the tag as its tag, minute:tag as its key."""
    from pyspark.sql import functions as F

    minute_ms = (F.unix_micros("minute") / 1000).cast("long")
    return counts.select(
        F.to_json(F.struct(minute_ms.alias("minute"), "tag", "messages", "bytes"),
                  {"ignoreNullFields": "false"}).alias("body"),
        F.col("tag").alias("tags"),
        F.concat_ws(":", minute_ms.cast("string"), F.coalesce("tag", F.lit(""))).alias("keys"),
    )


def _write(job: TagCountsJob, counts: Any, parquet_mode: str) -> int:
    rows = counts.count()
    if job.parquet:
        counts.write.mode(parquet_mode).parquet(job.parquet)
    if job.result_topic:
        (as_messages(counts).write.format("rocketmq").option("nameServer", job.name_server)
         .option("topic", job.result_topic).mode("append").save())
    return int(rows)


def run_tag_counts(spark: Any, job: TagCountsJob) -> int:
    """Run the job; the number of (minute, tag) rows written (batch) or 0 (stream)."""
    reader = spark.readStream if job.stream else spark.read
    df = reader.format("rocketmq").options(**source_options(job)).load()
    if not job.stream:  # minutes x tags: small, so one partition (not 200 tiny write tasks)
        counts = tag_counts(df, time_column=job.time_column).coalesce(1).cache()
        try:
            return _write(job, counts, job.mode)
        finally:
            counts.unpersist()
    counts = tag_counts(df.withWatermark(job.time_column, job.lateness), windowed=True,
                        time_column=job.time_column)

    def each_batch(batch: Any, batch_id: int) -> None:
        batch = batch.coalesce(1).cache()
        try:
            n = _write(job, batch, "append")
            log.info("tag-counts micro-batch %d: %d closed minute(s) written", batch_id, n)
        finally:
            batch.unpersist()

    writer = counts.writeStream.outputMode("append").foreachBatch(each_batch)
    writer = writer.option("checkpointLocation", job.checkpoint)
    if job.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=job.trigger)
    query = writer.start()
    query.awaitTermination()
    return 0
