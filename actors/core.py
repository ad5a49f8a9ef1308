"""The contract between the actor runtime and the pure request-processor cores.

Mirrors remoting/netty/NettyRequestProcessor.java + NettyRemotingAbstract.java, RocketMQ 4.9.x:
a processor is registered for a set of request codes; the runtime hands it requests in
batches and carries its replies (and any server-initiated requests) back to the client's
connection. Cores are plain classes: no Thespian, no sockets, time passed in.
CodeDispatchCore is the `switch (request.getCode())` at the top of RocketMQ's multi-code
processors (AdminBrokerProcessor, ConsumerManageProcessor, ClientManageProcessor,
QueryMessageProcessor, namesrv DefaultRequestProcessor), shared by the broker and name server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, runtime_checkable

from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError

if TYPE_CHECKING:
    from actors.broker.config import BrokerConfig

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Request:
    """One client request as a processor core sees it."""

    conn_id: int  # the client connection, unique for the life of a RemotingServer
    peer: tuple[str, int]  # the client's (ip, port) as the broker sees it (bornHost)
    cmd: RemotingCommand
    recv_ns: int  # time.monotonic_ns() when the RemotingServer decoded the frame


class Outbox(Protocol):
    """Where a core's output goes: replies and server-initiated requests to a connection."""

    def send(self, conn_id: int, cmd: RemotingCommand) -> None:
        """Queue `cmd` for the connection; dropped silently when the connection is gone."""
        ...

    def call(self, conn_id: int, cmd: RemotingCommand) -> None:
        """Queue the request `cmd` for the client; its answer (same opaque) reaches the
        sending core's on_client_response (Broker2Client.callClient)."""
        ...

    def close_conn(self, conn_id: int) -> None:
        """Ask the RemotingServer to close the connection (e.g. an expired client channel)."""
        ...


class ProcessorCore(Protocol):
    """A request processor (an isolated executor in RocketMQ terms)."""

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Handle one request; return the reply, or None (oneway, or replied later via outbox)."""
        ...

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """A client connection closed or was dropped for idleness."""
        ...

    def tick(self, now_ms: int) -> int | None:
        """Run due timers; return ms until the next wanted tick, or None for no timer."""
        ...


# Optional capabilities of a core, declared by implementing them; the runtime checks each one
# once (isinstance), when it sets the core up, never per request.


@runtime_checkable
class FastPathCore(Protocol):
    """A core that answers its hottest request straight from the frame (send, pull)."""

    def fast_path(
        self, frame: memoryview, conn_id: int, peer: tuple[str, int], now_ms: int
    ) -> bytes | None:
        """The encoded reply, b"" (taken, nothing to answer now) or None (not taken: the
        request goes to process())."""
        ...


class AccessCheck(Protocol):
    """The RPC hook a broker runs before a request reaches its processor (ACL)."""

    def check(self, code: int, ext: Mapping[str, str] | None, body: bytes | memoryview | None,
              peer: tuple[str, int] | None, now_ms: int) -> str | None:  # fmt: skip
        """None when the request may go on, else the remark of its SYSTEM_ERROR answer."""
        ...


@runtime_checkable
class AccessCheckingCore(Protocol):
    """A FastPathCore whose fast path runs the broker's access check itself (on the header
    fields it parses anyway) and leaves a refused request to process(): with ACL on, the
    host keeps its fast path instead of turning it off."""

    access: AccessCheck | None


@runtime_checkable
class ClientResponseCore(Protocol):
    """A core that sends requests to clients (Outbox.call) and takes their answers."""

    def on_client_response(self, resp: RemotingCommand, now_ms: int) -> None:
        """A client answered a request this core sent it (same opaque)."""
        ...


@runtime_checkable
class GroupCommitCore(Protocol):
    """A core that parks replies until the store is flushed or a slave has them."""

    waiting: list[Any]  # the parked replies

    def flush_and_release(self, now_ms: int) -> int:
        """Flush once, answer what is covered or late; how many were answered."""
        ...

    def next_look_ms(self, now_ms: int) -> int | None:
        """When the parked replies want their next look (None: none parked)."""
        ...


@runtime_checkable
class FdWatchingCore(Protocol):
    """A core with descriptors of its own for the runtime to watch (e.g. HA connections)."""

    def watch_fds(self) -> list[int]:
        """The descriptors to watch besides the runtime's channels."""
        ...

    def on_fd_ready(self, fds: list[int], now_ms: int) -> None:
        """Some of watch_fds() are readable."""
        ...


@runtime_checkable
class ConnectionLossCore(Protocol):
    """A core that tells a connection closed (by its client or the broker) from one that died
    with the RemotingServer process that owned its socket: the client is likely alive and
    reconnecting, so what it registered is kept (client_manage's consumer and producer
    channels). Cores without it get on_connection_closed for both."""

    def on_connection_lost(self, conn_id: int, now_ms: int) -> None:
        """The connection died with its RemotingServer."""
        ...


@runtime_checkable
class BarrierCore(Protocol):
    """A core that holds replies until the controller's registration barrier is passed."""

    def release(self, token: int, now_ms: int) -> bool:
        """The registration after the change held under `token` went out."""
        ...


@runtime_checkable
class FlushedCore(Protocol):
    """A core with something to do once a batch's output has been written out of its process
    (the send core wakes the HA service only then)."""

    def after_flush(self, now_ms: int) -> None:
        """The batch's replies and link records were written (as far as the sockets took)."""
        ...


@runtime_checkable
class BatchEndCore(Protocol):
    """A core with work to do once per batch, after its requests (the send core forwards the
    batch's arrival notices: NotifyMessageArrivingListener, coalesced)."""

    def end_batch(self, now_ms: int) -> None:
        """A batch of requests (or a timer, or a control message) was handled."""
        ...


class HoldObserver(Protocol):
    """Told of every pull the pull core hands to the hold service and gets back: the ledger
    from which the RemotingServer answers them if the pull actor's process dies
    (actors.runtime.request_ledger)."""

    def held(self, req: Request, offset: int) -> object:
        """`req` is parked, pulling from queue offset `offset`; a token for released()."""
        ...

    def released(self, token: object) -> None:
        """The request held() returned `token` for is answered (or its connection gone)."""
        ...


@runtime_checkable
class ObservedHoldCore(Protocol):
    """A core whose parked requests the runtime records in its request ledger (the pull core)."""

    hold_observer: HoldObserver | None


class HeldPullTable(Protocol):
    """The hold table of a PullRequestHoldService, keyed "topic@queueId"."""

    table: dict[str, Any]


@runtime_checkable
class HoldingCore(Protocol):
    """A core that holds requests until messages arrive (the hold service's)."""

    hold: HeldPullTable


class Link(Protocol):
    """A link to another actor of the broker (actors.runtime.links): typed records both ways
    (actors.runtime.link_records), and RemotingCommand requests whose answers come back to
    the core's on_link_response, in the order the requests went."""

    @property
    def role(self) -> str:
        """The peer: a processor group ("send", "hold", ...) or "HAService"."""
        ...

    @property
    def alive(self) -> bool:
        """False once the link closed (what is sent then goes nowhere)."""
        ...

    def send(self, record: Any) -> None:
        """Queue a typed record for the peer."""
        ...

    def request(self, cmd: RemotingCommand) -> None:
        """Queue a request for the peer's core; its answer reaches on_link_response."""
        ...


@runtime_checkable
class LinkedCore(Protocol):
    """A core that talks to other actors of the broker over links (the services and the
    processors they serve); the runtime opens the links the controller names."""

    def on_link(self, link: Link, now_ms: int) -> None:
        """A link came up: one this actor opened, or one opened to it (after its hello)."""
        ...

    def on_link_record(self, link: Link, record: Any, now_ms: int) -> None:
        """A typed record arrived on the link."""
        ...

    def on_link_response(self, link: Link, resp: RemotingCommand, now_ms: int) -> None:
        """The peer answered a request this core sent on the link."""
        ...

    def on_link_lost(self, link: Link, now_ms: int) -> None:
        """The link closed (the peer died or was stopped)."""
        ...


@runtime_checkable
class FrameOutbox(Protocol):
    """An outbox that also takes answers encoded elsewhere (GroupTransferService's)."""

    def send_frame(self, conn_id: int, encoded: bytes) -> bool:
        """Queue an encoded frame (length prefix included) for the connection; False when no
        RemotingServer channel is up to take it (a replacement actor before its channel)."""
        ...


@runtime_checkable
class StoreShutdownCore(Protocol):
    """A core with state to persist just before its store shuts down cleanly."""

    def before_store_shutdown(self, now_ms: int) -> None:
        """The store is about to shut down: persist what belongs to the core."""
        ...


@runtime_checkable
class ClosingCore(Protocol):
    """A core with resources of its own to release when its actor stops."""

    def close(self) -> None:
        """The actor stops: release (and publish one last time) what the core holds."""
        ...


@dataclass(frozen=True)
class ProcessorGroup:
    """One isolated executor of a personality: its request codes, the fast-failure limit
    (read from the BrokerConfig) and the factory of its core (ProcessorActor reads every
    field)."""

    name: str
    codes: frozenset[int]
    max_wait_ms: Callable[[BrokerConfig], int]  # the fast-failure limit (waitTimeMillsIn...)
    build: Callable[[Any], ProcessorCore]  # context -> core
    # after a pass that served something, poll without sleeping this long (WatchingActor.SPIN_US):
    # the send group's next request is then read without a wake-up (A: +12-16%, measured)
    spin_us: float = 0.0
    # the codes fast failure may shed (None: every code of the group). BrokerFastFailure cleans
    # the send, pull, heartbeat and end-transaction queues only, so of the send group's codes
    # the replies, the half-message resume and the delay-offset query are never shed
    shed_codes: frozenset[int] | None = None
    # requests per sub-batch of a channel read: the replies so far leave before the rest is
    # processed. Pull answers are ~33 KiB each: one at a time keeps the RemotingServer and
    # the client working on the first while the next is read from the store (C: 4 pulls in
    # flight went from travelling as one wave through three processes to a pipeline)
    reply_flush_every: int = 16
    # the group writes its answers to the client's socket itself when it can (Unix channels
    # only; see actors.runtime.direct_reply): a pull answer then crosses no channel and the
    # RemotingServer never reads or copies it
    direct_replies: bool = False
    # the group holds requests (long polling): the RemotingServer keeps what it needs to answer
    # every request the group took if its process dies (actors.runtime.request_ledger)
    holds_requests: bool = False
    # the groups this group's actor opens a link to (actors.runtime.links), told where they
    # listen by the controller (ConnectLink): e.g. the pull actor's to the hold service
    links: tuple[str, ...] = ()
    # whether the group runs on a broker of this config (None: on every broker)
    runs_on: Callable[[Any], bool] | None = None


Handler = Callable[[Request, int], RemotingCommand | None]  # None: answered later (or oneway)

# What a malformed JSON body raises in the handlers (lenient parsers, int(), dict lookups).
BAD_BODY_ERRORS: tuple[type[Exception], ...] = (ValueError, KeyError, TypeError, AttributeError)

# FAQUrl.suggestTodo: what Java appends to a remark that points the user at the FAQ.
FAQ_SUFFIX: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def not_supported(cmd: RemotingCommand) -> RemotingCommand:
    """REQUEST_CODE_NOT_SUPPORTED with Java's remark (note the leading space)."""
    return cmd.make_response(
        RS.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
    )


class CodeDispatchCore:
    """process() by request code; subclasses fill `handlers` and may override the hooks."""

    # Reply at all to an unknown code (the name server returns null: no reply).
    REPLY_UNKNOWN: ClassVar[bool] = True
    # Extra exceptions that mean "bad request", answered SYSTEM_ERROR with the message.
    BAD_REQUEST_ERRORS: ClassVar[tuple[type[Exception], ...]] = ()
    BAD_REQUEST_REMARK: ClassVar[str] = "bad request body"

    handlers: dict[int, Handler]

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Run the handler for the code; None for oneway requests."""
        cmd = req.cmd
        handler = self.handlers.get(cmd.code)
        if handler is None:
            log.warning("request type %d not supported", cmd.code)
            if not self.REPLY_UNKNOWN:
                return None
            return None if cmd.is_oneway else not_supported(cmd)
        try:
            resp = handler(req, now_ms)
        except HeaderFieldError as e:
            resp = cmd.make_response(e.code, e.remark)
        except self.BAD_REQUEST_ERRORS as e:
            log.warning("bad request code=%d: %s", cmd.code, e)
            resp = cmd.make_response(RS.SYSTEM_ERROR, f"{self.BAD_REQUEST_REMARK}: {e}")
        return None if cmd.is_oneway else resp

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Nothing per connection unless overridden."""

    def tick(self, now_ms: int) -> int | None:
        """No timers unless overridden."""
        return None


def properties_update(cmd: RemotingCommand, black_list: str) -> dict[str, str] | RemotingCommand:
    """The properties of an UPDATE_*_CONFIG body (none for an empty one: nothing changes, as
    in Java), or the error answer: a name in `black_list` (";"-separated, configBlackList)
    refusing the lot. Bytes that are not UTF-8 read as U+FFFD, as new String(body, UTF-8)
    reads them there (a name made of them is unknown, so ignored)."""
    from store.config import parse_properties_text

    props = parse_properties_text(bytes(cmd.body).decode("utf-8", "replace"))
    if {n.strip() for n in black_list.split(";") if n.strip()}.intersection(props):
        return cmd.make_response(RS.NO_PERMISSION, "Can not update config in black list.")
    return props
