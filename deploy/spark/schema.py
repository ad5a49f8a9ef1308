"""The rocketmq source's fixed schema: a stored message in RocketMQ's own terms.

Mirrors common/message/MessageExt.java's fields as a Spark row (what rocketmq-externals'
RocketMQSourceProvider exposed, plus msgId, tags, keys, the hosts and reconsumeTimes, and
the properties as a map instead of a JSON string). `properties` holds every property the
message was stored with (TAGS, KEYS, UNIQ_KEY and the system ones included, as
MessageExt.getProperties() returns them); tags, keys and msgId are also columns of their own.
"""

from __future__ import annotations

from typing import Any, Final

COLUMNS: Final = (
    ("topic", "STRING"),
    ("brokerName", "STRING"),
    ("queueId", "INT"),
    ("queueOffset", "BIGINT"),
    ("msgId", "STRING"),  # UNIQ_KEY when the producer set one, else the offset message id
    ("tags", "STRING"),
    ("keys", "STRING"),  # space-separated, as KEYS is stored
    ("body", "BINARY"),  # inflated when it was stored compressed
    ("properties", "MAP<STRING,STRING>"),
    ("bornTimestamp", "TIMESTAMP"),
    ("storeTimestamp", "TIMESTAMP"),
    ("bornHost", "STRING"),  # ip:port
    ("storeHost", "STRING"),
    ("reconsumeTimes", "INT"),
)
SCHEMA_DDL: Final = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)


def arrow_schema() -> Any:
    """The same schema as a pyarrow.Schema (what read() yields record batches of)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("topic", pa.string()), ("brokerName", pa.string()), ("queueId", pa.int32()),
        ("queueOffset", pa.int64()), ("msgId", pa.string()), ("tags", pa.string()),
        ("keys", pa.string()), ("body", pa.binary()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("bornTimestamp", ts), ("storeTimestamp", ts), ("bornHost", pa.string()),
        ("storeHost", pa.string()), ("reconsumeTimes", pa.int32()),
    ])  # fmt: skip
