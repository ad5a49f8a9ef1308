"""A stand-in broker (echo cores) for the runtime tests: the real actors, another personality.

Mirrors nothing in RocketMQ: it exists so the runtime (channels, RemotingServer, processor
actors, fast failure, error handling, supervision) can be exercised without the real
processors. It is injected the way production builds the real broker, not through a seam:
EchoBrokerActor is a BrokerControllerActor whose PERSONALITY is ECHO and whose processor
actors are EchoProcessorActor (a ProcessorActor with the same personality). A test starts it
through the same supervision path, passing its dotted class path where the launcher passes
the real one (`launch.start_broker(..., actor_class=ECHO_BROKER)`, or `python -m
tests.support.echo_up up ...` for the CLI). The actor processes fork from the test process
(or import this module by name from the checkout), so nothing of it is in the package.

Codes (chosen from RocketMQ's request codes so real frames route the same way):
- "send" group: 10, 310, 320, 36: echo the body back, code SUCCESS.
- "pull" group: 11: echo, ext {"seen": arrival notices counted, "pings": EchoPing events};
  the send actor links to it (actors.runtime.links) and sends its arrivals as ArrivalNotices.
- "admin" group (default): 9999 raises (-> SYSTEM_ERROR), 9998 emits an EchoPing event
  (controller -> pull actor), anything else unknown -> REQUEST_CODE_NOT_SUPPORTED with
  " request type <code> not supported".

SlowEchoBrokerActor: the same, but its send core sleeps SLOW_SEND_S before each answer and
reads one request at a time (what the removed testSlowProcessorMs=send:300 did), so the
RemotingServer's fast failure can be watched.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from actors.broker.actor import BrokerControllerActor
from actors.broker.config import BrokerConfig
from actors.broker.processor_actor import ProcessorActor
from actors.core import Link, Outbox, ProcessorGroup, Request
from actors.runtime.link_records import ArrivalNotices
from protocol.command import RemotingCommand
from store.config import StoreConfig

log = logging.getLogger(__name__)

RAISE_CODE = 9999
STATS_CODE = 9998
SLOW_SEND_S = 0.3

ECHO_BROKER = "tests.support.echo_broker.EchoBrokerActor"
SLOW_ECHO_BROKER = "tests.support.echo_broker.SlowEchoBrokerActor"


@dataclass(frozen=True)
class EchoPing:
    """Event from the admin group to the pull group."""

    AUDIENCE: ClassVar[frozenset[str]] = frozenset({"pull"})
    n: int


class EchoContext:
    """Minimal BrokerContext stand-in."""

    def __init__(self, broker_config: BrokerConfig, store_config: StoreConfig, group: str,
                 outbox: Outbox) -> None:  # fmt: skip
        self.broker_config = broker_config
        self.store_config = store_config
        self.group = group
        self.outbox = outbox
        self.store = None
        self.events: list[Any] = []
        self.arrivals: list[tuple[Any, ...]] = []
        self.applied: list[Any] = []
        self.snapshot: Any = None

    def emit(self, event: Any) -> None:
        """Queue an event for the controller."""
        self.events.append(event)

    def drain_events(self) -> list[Any]:
        """Events since the last drain."""
        out, self.events = self.events, []
        return out

    def drain_arrivals(self) -> list[Any]:
        """Arrival notices since the last drain."""
        out, self.arrivals = self.arrivals, []
        return out

    def apply(self, event: Any, now_ms: int) -> None:
        """Apply a forwarded event."""
        self.applied.append(event)

    def load_snapshot(self, snapshot: Any) -> None:
        """Keep the controller snapshot."""
        self.snapshot = snapshot


class EchoCore:
    """Echoes requests; see the module docstring for the special codes."""

    def __init__(self, ctx: EchoContext) -> None:
        self.ctx = ctx
        self.notices = 0
        self.pull: Link | None = None  # the send actor's link to the pull actor

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Answer one request."""
        cmd = req.cmd
        group = self.ctx.group
        if group == "send":
            self.ctx.arrivals.append(("EchoTopic", 0, 1, 0, now_ms))
            return cmd.make_response(0, None, {"peer": f"{req.peer[0]}:{req.peer[1]}"}, cmd.body)
        if group == "pull":
            pings = sum(1 for e in self.ctx.applied if isinstance(e, EchoPing))
            ext = {"seen": str(self.notices), "pings": str(pings)}
            return cmd.make_response(0, None, ext, cmd.body)
        if cmd.code == RAISE_CODE:
            raise RuntimeError("echo core asked to fail")
        if cmd.code == STATS_CODE:
            self.ctx.emit(EchoPing(1))
            return cmd.make_response(0, None, {})
        return cmd.make_response(3, f" request type {cmd.code} not supported")

    def on_link(self, link: Link, now_ms: int) -> None:
        """The send actor's link to the pull actor."""
        if link.role == "pull":
            self.pull = link

    def on_link_record(self, link: Link, record: Any, now_ms: int) -> None:
        """Count notices."""
        if isinstance(record, ArrivalNotices):
            self.notices += len(record.notices)

    def on_link_response(self, link: Link, resp: RemotingCommand, now_ms: int) -> None:
        """No requests go on links."""

    def on_link_lost(self, link: Link, now_ms: int) -> None:
        """The pull actor died."""
        if link is self.pull:
            self.pull = None

    def end_batch(self, now_ms: int) -> None:
        """The send actor's arrivals, one notice each, to the pull actor."""
        arrivals = self.ctx.drain_arrivals()
        if arrivals and self.pull is not None:
            self.pull.send(ArrivalNotices(tuple(arrivals)))

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Nothing to forget."""

    def tick(self, now_ms: int) -> int | None:
        """No timers."""
        return None


class SlowEchoCore(EchoCore):
    """An echo core that takes SLOW_SEND_S over each request."""

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        time.sleep(SLOW_SEND_S)
        return super().process(req, now_ms)


class EchoController:
    """Stand-in ControllerCore (no optional capability): no files, no name servers."""

    def __init__(self, broker_config: BrokerConfig, store_config: StoreConfig, now_ms: int
                 ) -> None:  # fmt: skip
        self.broker_config = broker_config

    def snapshot(self) -> Any:
        """Nothing to replicate."""
        return None

    def route_events(self, events: list[Any], origin: str, now_ms: int
                     ) -> tuple[dict[str, list[Any]], bool]:
        """Forward each event to its AUDIENCE (not the origin); never re-register."""
        forward: dict[str, list[Any]] = {}
        for ev in events:
            for group in ev.AUDIENCE:
                if group != origin:
                    forward.setdefault(group, []).append(ev)
        return forward, False

    def shutdown(self, now_ms: int) -> None:
        """Nothing to persist."""

    def register_requests(self, now_ms: int) -> list[tuple[str, RemotingCommand]]:
        """No name servers."""
        return []

    def unregister_requests(self) -> list[tuple[str, RemotingCommand]]:
        """No name servers."""
        return []

    def persist(self, now_ms: int) -> None:
        """Nothing to persist."""

    def tick(self, now_ms: int) -> int | None:
        """No timers."""
        return None


def _wait_send(bc: BrokerConfig) -> int:
    return bc.waitTimeMillsInSendQueue


def _wait_pull(bc: BrokerConfig) -> int:
    return bc.waitTimeMillsInPullQueue


def _wait_other(bc: BrokerConfig) -> int:
    return bc.waitTimeMillsInOtherQueue


class EchoPersonality:
    """actors.broker.personality.BrokerPersonality of the echo broker."""

    GROUPS: tuple[ProcessorGroup, ...] = (
        ProcessorGroup("send", frozenset({10, 310, 320, 36}), _wait_send, EchoCore,
                       links=("pull",)),
        ProcessorGroup("pull", frozenset({11}), _wait_pull, EchoCore),
        ProcessorGroup("admin", frozenset({RAISE_CODE, STATS_CODE}), _wait_other, EchoCore),
    )
    DEFAULT_GROUP = "admin"

    def make_context(self, broker_config: BrokerConfig, store_config: StoreConfig, *,
                     group: str, outbox: Outbox, now_ms: int) -> EchoContext:  # fmt: skip
        """Build the stand-in context."""
        return EchoContext(broker_config, store_config, group, outbox)

    def make_controller(self, broker_config: BrokerConfig, store_config: StoreConfig,
                        now_ms: int, runtime_dir: str = "") -> EchoController:  # fmt: skip
        """Build the stand-in controller core (nothing goes in the runtime directory)."""
        return EchoController(broker_config, store_config, now_ms)


class SlowEchoPersonality(EchoPersonality):
    """The echo broker with a slow send group, one request per host pass."""

    GROUPS = tuple(
        dataclasses.replace(g, build=SlowEchoCore, reply_flush_every=1) if g.name == "send"
        else g
        for g in EchoPersonality.GROUPS
    )


ECHO = EchoPersonality()
SLOW_ECHO = SlowEchoPersonality()


class EchoProcessorActor(ProcessorActor):
    """A ProcessorActor hosting an echo core."""

    PERSONALITY = ECHO


class EchoBrokerActor(BrokerControllerActor):
    """A BrokerControllerActor of echo processors (its process named like the real one's)."""

    PERSONALITY = ECHO
    PROCESSOR_ACTOR = EchoProcessorActor

    def process_role(self) -> str:
        return BrokerControllerActor.__name__


class SlowEchoProcessorActor(ProcessorActor):
    """A ProcessorActor hosting an echo core, the send group's slow."""

    PERSONALITY = SLOW_ECHO


class SlowEchoBrokerActor(EchoBrokerActor):
    """The echo broker with a slow send group."""

    PERSONALITY = SLOW_ECHO
    PROCESSOR_ACTOR = SlowEchoProcessorActor
