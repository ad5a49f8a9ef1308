"""Offset stores: increase-only updates, read types, broker persistence, the local file."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetNotFoundError,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    format_offset_wrapper,
    parse_offset_wrapper,
)
from protocol.bodies import MessageQueue

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)
MQ2 = MessageQueue("U", "broker-b", 0)


class Broker:
    """An in-memory OffsetBroker: the broker's consumerOffset table for one group."""

    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}
        self.calls: list[tuple[MessageQueue, int, bool]] = []
        self.down = False

    def query_offset(self, mq: MessageQueue) -> int:
        if self.down:
            raise ConnectionError("down")
        if mq not in self.offsets:
            raise OffsetNotFoundError(str(mq))
        return self.offsets[mq]

    def commit_offset(self, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        if self.down:
            raise ConnectionError("down")
        self.calls.append((mq, offset, oneway))
        self.offsets[mq] = offset


def test_update_increase_only_and_read_types() -> None:
    broker = Broker()
    broker.offsets[MQ1] = 40
    store = RemoteBrokerOffsetStore("g", broker)
    store.update_offset(MQ0, 10, increase_only=True)
    store.update_offset(MQ0, 5, increase_only=True)
    assert store.read_offset(MQ0, ReadOffsetType.READ_FROM_MEMORY) == 10
    store.update_offset(MQ0, 5, increase_only=False)  # orderly / reset may go back
    assert store.read_memory(MQ0) == 5
    assert store.read_offset(MQ1, ReadOffsetType.READ_FROM_MEMORY) == -1
    assert store.read_offset(MQ1, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 40
    assert store.read_memory(MQ1) == 40  # cached once read
    assert store.read_offset(MQ2, ReadOffsetType.READ_FROM_STORE) == -1  # none on the broker
    broker.down = True
    assert store.read_offset(MQ2, ReadOffsetType.READ_FROM_STORE) == -2


def test_persist_all_forgets_queues_no_longer_held() -> None:
    broker = Broker()
    store = RemoteBrokerOffsetStore("g", broker)
    store.update_offset(MQ0, 3, True)
    store.update_offset(MQ1, 4, True)
    store.persist_all({MQ0})
    assert broker.calls == [(MQ0, 3, True)]
    assert store.clone_offset_table() == {MQ0: 3}
    store.persist(MQ0, sync=True)
    assert broker.calls[-1] == (MQ0, 3, False)
    broker.down = True
    store.persist_all({MQ0})  # logged, not raised: the next tick retries
    with pytest.raises(ConnectionError):
        store.persist(MQ0, sync=True)  # a close must know


def test_local_file_store_round_trip(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("g", "10.0.0.1@123", str(tmp_path))
    store.update_offset(MQ0, 7, True)
    store.update_offset(MQ2, 9, True)
    store.persist_all({MQ0, MQ2})
    path = tmp_path / "10.0.0.1@123" / "g" / "offsets.json"
    assert path.is_file()
    again = LocalFileOffsetStore("g", "10.0.0.1@123", str(tmp_path))
    again.load()
    assert again.clone_offset_table() == {MQ0: 7, MQ2: 9}
    assert again.clone_offset_table("U") == {MQ2: 9}
    fresh = LocalFileOffsetStore("g", "10.0.0.1@123", str(tmp_path))
    assert fresh.read_offset(MQ2, ReadOffsetType.READ_FROM_STORE) == 9
    assert fresh.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE) == -1
    # a torn main file: the .bak (the previous content) is read
    store.update_offset(MQ0, 8, True)
    store.persist(MQ0)
    path.write_text("{garbage")
    assert LocalFileOffsetStore("g", "10.0.0.1@123", str(tmp_path)).read_offset(
        MQ0, ReadOffsetType.READ_FROM_STORE) == 7


def test_offset_wrapper_reads_fastjson_pretty_output() -> None:
    java = ('{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":0,\n'
            '\t\t\t"topic":"T"\n\t\t}:12,{\n\t\t\t"brokerName":"broker-b",\n\t\t\t"queueId":0,\n'
            '\t\t\t"topic":"U"\n\t\t}:3\n\t}\n}')
    assert parse_offset_wrapper(java) == {MQ0: 12, MQ2: 3}
    ours = format_offset_wrapper({MQ2: 3, MQ0: 12})
    assert ours.startswith('{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:12')
    assert parse_offset_wrapper(ours) == {MQ0: 12, MQ2: 3}
