"""The PySpark Python Data Source named `rocketmq`: read and write RocketMQ topics.

Mirrors rocketmq-externals RocketMQSourceProvider (shortName "rocketmq", a fixed schema, the
source and sink created from options) as a PySpark (>= 4.0) DataSource. The readers and
writers parse their options when Spark creates them on the driver, and a batch read is
planned there too: bad options and unknown topics fail before any task runs.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from deploy.spark.schema import SCHEMA_DDL


class RocketMQDataSource(DataSource):
    """format("rocketmq")."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "rocketmq"

    def schema(self) -> str:
        """The fixed schema (deploy.spark.schema)."""
        return SCHEMA_DDL

    def reader(self, schema: Any) -> Any:
        """Batch reads."""
        from deploy.spark.reader import RocketMQBatchReader

        return RocketMQBatchReader(dict(self.options))

    def streamReader(self, schema: Any) -> Any:
        """Streaming reads."""
        from deploy.spark.reader import RocketMQStreamReader

        return RocketMQStreamReader(dict(self.options))

    def writer(self, schema: Any, overwrite: bool) -> Any:
        """Batch writes."""
        from deploy.spark.writer import RocketMQWriter

        return RocketMQWriter(dict(self.options), schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        """Streaming writes."""
        from deploy.spark.writer import RocketMQStreamWriter

        return RocketMQStreamWriter(dict(self.options), schema)
