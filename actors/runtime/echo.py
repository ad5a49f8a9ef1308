"""A tiny stand-in broker personality (echo cores) for runtime tests and benchmarks.

Mirrors nothing in RocketMQ: it exists so the runtime (channels, RemotingServer, processor
actors, fast failure, error handling) can be exercised without the real processors. A
personality module provides GROUPS, DEFAULT_GROUP, make_context(...) and make_controller(...).

Codes (chosen from RocketMQ's request codes so real frames route the same way):
- "send" group: 10, 310, 320, 36: echo the body back, code SUCCESS.
- "pull" group: 11: echo, ext {"seen": arrival notices counted, "pings": EchoPing events};
  the send actor links to it (actors.runtime.links) and sends its arrivals as ArrivalNotices.
- "admin" group (default): 9999 raises (-> SYSTEM_ERROR), 9998 emits an EchoPing event
  (controller -> pull actor), anything else unknown -> REQUEST_CODE_NOT_SUPPORTED with
  " request type <code> not supported".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from actors.core import Link, Outbox, ProcessorGroup, Request
from actors.runtime.link_records import ArrivalNotices
from protocol.command import RemotingCommand

log = logging.getLogger(__name__)

RAISE_CODE = 9999
STATS_CODE = 9998


@dataclass(frozen=True)
class EchoPing:
    """Event from the admin group to the pull group."""

    AUDIENCE = frozenset({"pull"})
    n: int


class EchoContext:
    """Minimal BrokerContext stand-in."""

    def __init__(self, broker_config: Any, store_config: Any, group: str, outbox: Outbox) -> None:
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

    def drain_arrivals(self) -> list[tuple[Any, ...]]:
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


GROUPS: tuple[ProcessorGroup, ...] = (
    ProcessorGroup("send", frozenset({10, 310, 320, 36}), "waitTimeMillsInSendQueue", EchoCore,
                   links=("pull",)),
    ProcessorGroup("pull", frozenset({11}), "waitTimeMillsInPullQueue", EchoCore),
    ProcessorGroup("admin", frozenset({RAISE_CODE, STATS_CODE}), "waitTimeMillsInOtherQueue",
              EchoCore),
)
DEFAULT_GROUP = "admin"


def make_context(
    broker_config: Any, store_config: Any, *, group: str, outbox: Outbox, now_ms: int
) -> EchoContext:
    """Build the stand-in context."""
    return EchoContext(broker_config, store_config, group, outbox)


class EchoController:
    """Stand-in ControllerCore (no optional capability): no files, no name servers."""

    def __init__(self, broker_config: Any, store_config: Any, now_ms: int) -> None:
        self.broker_config = broker_config

    def snapshot(self) -> Any:
        """Nothing to replicate."""
        return None

    def route_events(self, events: list[Any], origin: str, now_ms: int
                     ) -> tuple[dict[str, list[Any]], bool]:
        """Forward each event to its AUDIENCE (not the origin); never re-register."""
        forward: dict[str, list[Any]] = {}
        for ev in events:
            for group in getattr(ev, "AUDIENCE", ()):
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


def make_controller(broker_config: Any, store_config: Any, now_ms: int,
                    runtime_dir: str = "") -> EchoController:  # fmt: skip
    """Build the stand-in controller core (nothing goes in the runtime directory)."""
    return EchoController(broker_config, store_config, now_ms)
