"""Broker personalities: where the processor groups, their contexts and the controller core
come from.

Mirrors the registration half of broker/BrokerController.java (initialize: which processor
serves which request codes, and the controller's own state), RocketMQ 4.9.x. The broker's
actors take theirs from a class attribute (BrokerControllerActor.PERSONALITY,
ProcessorActor.PERSONALITY): BROKER, the real one. Another personality is another actor class
(the runtime tests' echo broker subclasses both), started through the same supervision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from actors.broker.config import BrokerConfig
from actors.core import Outbox, ProcessorGroup
from protocol.command import RemotingCommand
from store.config import StoreConfig

if TYPE_CHECKING:
    from actors.broker.controller import BrokerControllerCore


# -- the controller core: what every one has, and the optional capabilities ------------------
class ControllerCore(Protocol):
    """The broker's authoritative state as BrokerControllerActor drives it (every personality)."""

    def snapshot(self) -> Any:
        """The state a starting processor actor loads (None: nothing to replicate)."""
        ...

    def route_events(
        self, events: list[Any], origin: str, now_ms: int
    ) -> tuple[dict[str, list[Any]], bool]:
        """Apply a processor's events: (group -> events to forward, register again now?)."""
        ...

    def register_requests(self, now_ms: int) -> list[tuple[str, RemotingCommand]]:
        """(name server, REGISTER_BROKER) for every name server."""
        ...

    def unregister_requests(self) -> list[tuple[str, RemotingCommand]]:
        """(name server, UNREGISTER_BROKER) for every name server."""
        ...

    def persist(self, now_ms: int) -> None:
        """The periodic persist (consumer offsets every flushConsumerOffsetInterval)."""
        ...

    def shutdown(self, now_ms: int) -> None:
        """Persist everything at a clean shutdown."""
        ...

    def tick(self, now_ms: int) -> int | None:
        """Run due timers; ms until the next wanted tick, or None for no timer."""
        ...


# Optional capabilities, declared by implementing them; the controller actor checks each one
# once (isinstance) when it sets the core up, never per event.


@runtime_checkable
class VersionedController(Protocol):
    """A controller that emits events of its own (data versions) as it applies others."""

    def take_version_events(self) -> dict[str, list[Any]]:
        """group -> the controller's own events since the last take."""
        ...


@runtime_checkable
class BarrierController(Protocol):
    """A controller that holds a change's replies until its registration went out."""

    def take_barriers(self) -> list[tuple[str, int]]:
        """(origin group, token) of the changes applied since the last take."""
        ...


@runtime_checkable
class NamesrvController(Protocol):
    """A controller that reads the name servers' answers to its registrations."""

    def on_namesrv_response(self, addr: str, cmd: RemotingCommand, now_ms: int) -> None:
        """A name server answered (REGISTER_BROKER: the master and HA addresses)."""
        ...

    def order_topic_events(self, addr: str, cmd: RemotingCommand) -> list[Any]:
        """The events of the order topic list in the answer (updateOrderTopicConfig)."""
        ...


@runtime_checkable
class HaController(Protocol):
    """A controller in a replicated pair: the master's HA port, a slave's master and sync."""

    @property
    def master_addr(self) -> str:
        """A slave's master ("" while unknown, and on a master)."""
        ...

    @property
    def slave_sync_codes(self) -> tuple[int, ...]:
        """The requests of one SlaveSynchronize round."""
        ...

    def set_ha_port(self, port: int) -> None:
        """The HA service listens on `port` (registered with the name servers)."""
        ...

    def take_master_change(self) -> dict[str, list[Any]]:
        """group -> the events of a master change since the last take."""
        ...

    def slave_sync_events(self, code: int, body: bytes) -> list[Any]:
        """The events of the master's answer to one SlaveSynchronize request."""
        ...


# -- a processor context: what ProcessorActor uses, and its optional part ---------------------
class ProcessorStore(Protocol):
    """The store a processor context holds, as its actor uses it (a DefaultMessageStore in the
    writer, a MessageStoreReader elsewhere)."""

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's max offset (the held pulls' re-check)."""
        ...

    def close(self) -> None:
        """The actor stops."""
        ...


class ProcessorContext(Protocol):
    """One processor actor's replica of the broker state, as ProcessorActor drives it."""

    @property
    def store(self) -> Any:
        """The store of this group (None for a group without one); a ProcessorStore."""
        ...

    def apply(self, event: Any, now_ms: int) -> None:
        """Apply a replicated event (an exception leaves the replica wrong: let it fail)."""
        ...

    def load_snapshot(self, snapshot: Any) -> None:
        """Load the controller's snapshot, before any request."""
        ...

    def drain_events(self) -> list[Any]:
        """The events emitted since the last drain (for the controller)."""
        ...

    def drain_arrivals(self) -> list[Any]:
        """The arrival notices since the last drain (the send group's, for the pull group)."""
        ...


@runtime_checkable
class HostedContext(Protocol):
    """A processor context that takes the broker's runtime directory and registration barrier."""

    runtime_dir: str  # the broker's private directory on this host (e.g. HA wake pipes)
    registration_barrier: bool  # the controller releases replies held for a registration


# -- personalities: where groups, contexts and the controller core come from ------------------
class BrokerPersonality(Protocol):
    """What a broker's actors are made of: its processor groups (the default one takes unknown
    codes), each group's context and the controller core."""

    @property
    def GROUPS(self) -> tuple[ProcessorGroup, ...]:
        ...

    @property
    def DEFAULT_GROUP(self) -> str:
        ...

    def make_context(self, broker_config: BrokerConfig, store_config: StoreConfig, *,
                     group: str, outbox: Outbox, now_ms: int) -> ProcessorContext:  # fmt: skip
        """The context of one processor actor (group `group`)."""
        ...

    def make_controller(self, broker_config: BrokerConfig, store_config: StoreConfig,
                        now_ms: int, runtime_dir: str) -> ControllerCore:  # fmt: skip
        """The controller core, its files loaded."""
        ...


class RealPersonality:
    """The real broker: actors.broker.processors + actors.broker.controller (H5's cores)."""

    @property
    def GROUPS(self) -> tuple[ProcessorGroup, ...]:
        from actors.broker.processors import BROKER_PROCESSOR_GROUPS

        return BROKER_PROCESSOR_GROUPS

    @property
    def DEFAULT_GROUP(self) -> str:
        from actors.broker.processors import DEFAULT_GROUP

        return DEFAULT_GROUP

    def make_context(self, broker_config: BrokerConfig, store_config: StoreConfig, *,
                     group: str, outbox: Outbox, now_ms: int) -> ProcessorContext:  # fmt: skip
        from actors.broker.processors import make_context

        return make_context(broker_config, store_config, group=group, outbox=outbox,
                            now_ms=now_ms)  # fmt: skip

    def make_controller(self, broker_config: BrokerConfig, store_config: StoreConfig,
                        now_ms: int, runtime_dir: str) -> ControllerCore:  # fmt: skip
        from actors.broker.controller import BrokerControllerCore

        core = BrokerControllerCore(broker_config, store_config)
        core.load(now_ms, runtime_dir)  # the shared consumer offset table goes there
        return ControllerAdapter(core)


BROKER: BrokerPersonality = RealPersonality()  # the broker's actors' default


class ControllerAdapter:
    """The real controller core as a ControllerCore with every optional capability."""

    def __init__(self, core: BrokerControllerCore) -> None:
        self.core = core

    def snapshot(self) -> Any:
        return self.core.snapshot()

    def route_events(
        self, events: list[Any], origin: str, t: int
    ) -> tuple[dict[str, list[Any]], bool]:
        forward = self.core.apply_events(events, origin, t)
        return forward, bool(self.core.take_register_needed())

    def take_version_events(self) -> dict[str, list[Any]]:
        return dict(self.core.take_version_events())

    def register_requests(self, t: int) -> list[tuple[str, RemotingCommand]]:
        return list(self.core.build_register_requests(t))

    def take_barriers(self) -> list[tuple[str, int]]:
        return list(self.core.take_barriers())

    def unregister_requests(self) -> list[tuple[str, RemotingCommand]]:
        return list(self.core.build_unregister_requests())

    def persist(self, t: int) -> None:
        self.core.persist_offsets()

    def shutdown(self, t: int) -> None:
        self.core.shutdown(t)

    def on_namesrv_response(self, addr: str, cmd: RemotingCommand, t: int) -> None:
        self.core.on_register_response(addr, cmd)

    # HA: the master's HA port in registrations; a slave's master and SlaveSynchronize
    def set_ha_port(self, port: int) -> None:
        self.core.ha_port = port

    def take_master_change(self) -> dict[str, list[Any]]:
        return dict(self.core.take_master_change())

    def order_topic_events(self, addr: str, cmd: RemotingCommand) -> list[Any]:
        return list(self.core.order_topic_events(addr, cmd))

    @property
    def master_addr(self) -> str:
        return str(self.core.master_addr)

    @property
    def slave_sync_codes(self) -> tuple[int, ...]:
        return tuple(int(c) for c in self.core.SLAVE_SYNC_CODES)

    def slave_sync_events(self, code: int, body: bytes) -> list[Any]:
        return list(self.core.slave_sync_events(code, body))

    def tick(self, t: int) -> int | None:
        return self.core.tick(t)
