"""Typed records: how every record between two processes of ours is built and read.

Mirrors nothing in RocketMQ (its roles are threads of one JVM and call each other). Both
record channels use it: the broker's links between its service actors and processors
(actors.runtime.link_records, carried as LINK records of actors.runtime.channel) and the
client channel between the user's process and its client actors
(actors.client.client_channel and the consumer's records in consumer_channel).

A record type is a frozen dataclass deriving from TypedRecord that names its KIND (a byte)
and is registered in the RecordKinds of its channel. On the wire it is that kind byte (in the
channel's record head) and its fields as one msgpack array in declaration order; a type whose
fields hold nested records or tuples converts them in `row` / `from_row`. `RecordKinds.read`
turns (kind, payload) back into the record, and anything else (an unknown kind, a payload
that is not an array of the type's arity, a field of the wrong shape) into ChannelError:
nothing crosses as a bare list, and nothing read is mutated afterwards.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

import msgpack


class ChannelError(Exception):
    """The peer wrote something that is not a record stream of ours."""


def pack(obj: Any) -> bytes:
    """msgpack a payload (bytes stay bytes)."""
    return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(payload: memoryview | bytes) -> Any:
    """Inverse of pack."""
    return msgpack.unpackb(payload, raw=False)


_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """A record type's field names in declaration order (cached)."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


R = TypeVar("R", bound="TypedRecord")


class TypedRecord:
    """A typed record (subclasses: frozen dataclasses that name their KIND and are registered
    in their channel's RecordKinds); its fields cross as one msgpack array in declaration
    order."""

    __slots__ = ()
    KIND: ClassVar[int]

    def row(self) -> list[Any]:
        """The fields as msgpack values (a subclass with nested records converts them)."""
        return [getattr(self, name) for name in field_names(type(self))]

    @classmethod
    def from_row(cls: type[R], row: list[Any]) -> R:
        """The record from its row (a subclass with nested records or tuples converts them)."""
        return cls(*row)

    def encode(self) -> bytes:
        """The record's payload (its kind travels in the channel's record head)."""
        return pack(self.row())


class RecordKinds:
    """The record types of one channel, by kind (one type per kind)."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.types: dict[int, type[TypedRecord]] = {}

    def register(self, cls: type[R]) -> type[R]:
        """Class decorator: register cls under its KIND."""
        if not 0 <= cls.KIND <= 255:
            raise ValueError(f"record kind {cls.KIND} of {cls.__name__} is not a byte")
        if self.types.setdefault(cls.KIND, cls) is not cls:
            raise ValueError(f"{self.channel} record kind {cls.KIND} is taken by "
                             f"{self.types[cls.KIND].__name__}")  # fmt: skip
        return cls

    def read(self, kind: int, payload: memoryview | bytes) -> TypedRecord:
        """The typed record of (kind, payload); ChannelError when it is none."""
        cls = self.types.get(kind)
        if cls is None:
            raise ChannelError(f"unknown {self.channel} record kind {kind}")
        names = field_names(cls)
        if not names:
            return cls()
        try:
            row = unpack(payload)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            raise ChannelError(f"{self.channel} record kind {kind}: {exc}") from exc
        if not isinstance(row, list) or len(row) != len(names):
            raise ChannelError(f"{self.channel} record kind {kind} ({cls.__name__}) needs "
                               f"{len(names)} fields")  # fmt: skip
        try:
            return cls.from_row(row)
        except (TypeError, ValueError, IndexError) as exc:
            raise ChannelError(f"{self.channel} record kind {kind} ({cls.__name__}): "
                               f"{exc}") from exc  # fmt: skip
