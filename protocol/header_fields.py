"""The fields of a RemotingCommand header, as the header codecs read them.

Mirrors the header half of remoting/protocol/RemotingCommand.java (code, language, version,
opaque, flag, remark, extFields), RocketMQ 4.9.x: what RemotingSerializable (JSON,
protocol.remoting_serializable) and RocketMQSerializable (binary, protocol.rocketmq_serializable)
encode. protocol.command.RemotingCommand has them; the codecs depend on this declaration, not
on the command class that uses them.
"""

from __future__ import annotations

from typing import Protocol


class HeaderFields(Protocol):
    """A command's header fields (read-only here)."""

    @property
    def code(self) -> int: ...

    @property
    def language(self) -> int: ...

    @property
    def version(self) -> int: ...

    @property
    def opaque(self) -> int: ...

    @property
    def flag(self) -> int: ...

    @property
    def remark(self) -> str | None: ...

    @property
    def ext_fields(self) -> dict[str, str] | None: ...
