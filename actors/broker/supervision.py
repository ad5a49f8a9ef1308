"""The BrokerController's watch over its child actors: a dead one is replaced, what it held rebuilt.

Mirrors BrokerController.start()'s start of each service, RocketMQ 4.9.x, run again for the one
service whose actor died (a Java broker has no such step: its services are threads of one JVM).
The roles, as their processes are named (amq-<role>, actors.runtime.watch.name_process):

- RemotingServer: a new one listens on the same client and VIP ports, numbers its connections
  above every earlier one's (a processor never mistakes a new connection for an old one) and
  connects to every processor channel; the processors forget the dead one's connections when
  its channels close, except client_manage, which keeps their registrations as lost channels
  (actors.broker.consumer_manager) for the clients to take up again. The dead one's client
  connections are reset, not closed (actors.runtime.tcp): its clients, Java's too, fail what
  was pending on them at once and reconnect.
- a processor group (send, pull, consumer_manage, client_manage, query, admin) or service
  (hold, transfer, schedule, txcheck: PullRequestHoldService, GroupTransferService,
  ScheduleMessageService, TransactionalMessageCheckService): meanwhile the RemotingServer
  answers the group's requests SYSTEM_BUSY. The new actor starts from a fresh state snapshot,
  taken once the RemotingServer has handed the controller every replicated event it held
  (SyncEvents), listens on a new channel, and the RemotingServer connects to it
  (ConnectProcessor); then the links it opens and those opened to it are made again
  (ConnectLink, `wire_links`: what each side recovers is in its core's docstring). `send` is
  the one store writer: its store recovers (abnormally after a kill: the abort marker is there)
  and the readers in the other processes follow the state page's new generation; the
  IndexService is stopped first (the writer's recovery takes the index lock) and started again
  after it.
- IndexService: started again; it resumes from its own files.
- HAService (a master's): a new one on the same HA port; slaves reconnect by themselves, and it
  links to the GroupTransferService again.

A role that dies MAX_DEATHS times within DEATH_WINDOW_MS (actors.runtime.supervisor), or whose
replacement keeps failing to start, is given up: the broker stops itself as a StopBroker would
stop it (no half broker keeps serving) and RoleFailed goes up to the launcher, which exits
non-zero.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, ClassVar, Final

from thespian.actors import ActorAddress, ActorExitRequest, ChildActorExited

from actors.broker.personality import BrokerPersonality
from actors.core import ProcessorGroup
from actors.runtime.channel import ChannelAddr
from actors.runtime.messages import (
    BrokerStopped,
    ChildPids,
    ConnectLink,
    ConnectProcessor,
    EventsSynced,
    HAFailed,
    HAReady,
    IndexerFailed,
    IndexerReady,
    ProcessorReady,
    ProcessorStartFailed,
    RemotingReady,
    RemotingStartFailed,
    RoleFailed,
    StartBroker,
    StartRemoting,
    SyncEvents,
)
from actors.runtime.supervisor import RETRY_MS, Child, ChildRoles, RestartBudget
from actors.runtime.watch import WatchingActor, now_ms, terminating

if TYPE_CHECKING:
    from actors.broker.processor_actor import ProcessorActor

log = logging.getLogger(__name__)

REMOTING: Final = "RemotingServer"
INDEX: Final = "IndexService"
HA: Final = "HAService"
HA_LINKS: Final = ("transfer",)  # the HAService reports slave acks to the GroupTransferService
CONN_ID_GENERATION_SHIFT: Final = 36  # RemotingServer n numbers its connections from n << 36
SYNC_EVENTS_WAIT_MS: Final = 1000.0  # a processor starts anyway if SyncEvents is not answered


class BrokerChildSupervisor(WatchingActor):
    """The controller's side of supervision (BrokerControllerActor inherits it)."""

    # provided by BrokerControllerActor
    PERSONALITY: ClassVar[BrokerPersonality]
    PROCESSOR_ACTOR: ClassVar[type[ProcessorActor]]
    state: str
    start_msg: StartBroker | None
    requester: ActorAddress | None
    groups: list[ProcessorGroup]
    processors: dict[str, ActorAddress]
    channel_addrs: dict[str, ChannelAddr]
    channel_token: bytes
    remoting: ActorAddress | None
    port: int
    fast_port: int
    indexer: ActorAddress | None
    ha: ActorAddress | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.children = ChildRoles()
        self.budget = RestartBudget()
        self.pending_groups: set[str] = set()  # dead processors waiting for SyncEvents
        self.rs_generation = 0
        self.ha_port = 0  # what the HA service bound (a replacement binds it again)
        self.died_at: dict[str, float] = {}  # role -> when it died (time.monotonic())

    # -- hooks the controller implements ---------------------------------------------------------
    def _start_processor(self, group: str) -> None:
        raise NotImplementedError

    def _start_indexer(self) -> None:
        raise NotImplementedError

    def _start_ha(self) -> bool:
        raise NotImplementedError

    def _stop(self, sender: ActorAddress | None) -> None:
        raise NotImplementedError

    def _fail(self, reason: str) -> None:
        raise NotImplementedError

    def _after_index(self) -> None:
        raise NotImplementedError

    # -- bookkeeping -----------------------------------------------------------------------------
    def track(self, role: str, addr: ActorAddress) -> None:
        """Watch a child just created; its parent's supervisor learns its pid."""
        self.children.add(self, role, addr)
        self.report_pids()

    def report_pids(self) -> None:
        """Tell the RoleSupervisor above which processes make this broker."""
        if self.requester is not None:
            self.send(self.requester, ChildPids(self.children.pids()))

    def release(self, role: str) -> None:
        """A child we stop on purpose: its exit is no death."""
        self.children.forget(role)

    # -- messages --------------------------------------------------------------------------------
    def on_supervision(self, msg: Any) -> bool:
        """Handle what concerns a child's death or its replacement; True when handled."""
        if isinstance(msg, ChildActorExited):
            self._child_exited(msg.childAddress)
            return True
        if isinstance(msg, EventsSynced):
            self._start_pending_groups()
            return True
        if self.state != "running":
            return False
        if isinstance(msg, ProcessorReady):
            self._processor_ready(msg.group, msg.channel_addr)
        elif isinstance(msg, ProcessorStartFailed):
            self._replacement_failed(msg.group, msg.reason)
        elif isinstance(msg, RemotingReady):
            self._replaced(REMOTING)
        elif isinstance(msg, RemotingStartFailed):
            self._replacement_failed(REMOTING, msg.reason)
        elif isinstance(msg, HAReady):
            self.ha_port = msg.port
            self.wire_links(HA)
            self._replaced(HA)
        elif isinstance(msg, HAFailed):
            self._replacement_failed(HA, msg.reason)
        elif isinstance(msg, IndexerReady):
            log.info("index service ready at phy=%d", msg.next_phy)
            self._replaced(INDEX)
        elif isinstance(msg, IndexerFailed):
            self._replacement_failed(INDEX, msg.reason)
        else:
            return False
        return True

    def _child_exited(self, addr: ActorAddress) -> None:
        child = self.children.remove(addr)
        if child is None:
            return  # a stop we asked for, or a second notice of the same exit
        if child.role == INDEX and self.state == "stopping-index":
            self.indexer = None
            self._after_index()
            return
        if self.state.startswith("starting"):
            self._fail(f"{child.role} {child.cause()} while the broker started")
            return
        if self.state != "running" or terminating():  # a stop of the whole run: no death
            return
        self._died(child)

    def _died(self, child: Child) -> None:
        role, t = child.role, now_ms()
        cause = child.cause()
        if not self.budget.died(role, t):
            self._give_up(role, f"{cause}, {self.budget.describe(role, t)}")
            return
        log.error("role=%s pid=%s %s: replacing it (%s)", role, child.pid, cause,
                  self.budget.describe(role, t))  # fmt: skip
        self.died_at[role] = time.monotonic()
        self._replace(role)

    def _replace(self, role: str) -> None:
        if role == REMOTING:
            self._replace_remoting()
        elif role == INDEX:
            self.indexer = None
            self._start_indexer()
        elif role == HA:
            self.ha = None
            self._start_ha()
        elif role in self.processors:
            self._replace_processor(role)

    def _replaced(self, role: str) -> None:
        since = self.died_at.pop(role, None)
        if since is not None:
            log.warning("role=%s replaced: serving again %.0f ms after it died", role,
                        (time.monotonic() - since) * 1000.0)  # fmt: skip

    def _replacement_failed(self, role: str, reason: str) -> None:
        """A replacement could not start: counts as a death; it is stopped, and tried again
        after RETRY_MS."""
        failed = self.children.forget(role)
        if failed is not None:
            self.send(failed.addr, ActorExitRequest())
        t = now_ms()
        if not self.budget.died(role, t):
            self._give_up(role, f"its replacement keeps failing to start: {reason}")
            return
        log.error("role=%s replacement failed to start (%s): trying again in %.0f ms (%s)",
                  role, reason, RETRY_MS, self.budget.describe(role, t))  # fmt: skip
        self.schedule(f"replace:{role}", RETRY_MS)

    def on_replace_timer(self, key: str) -> bool:
        """A `replace:<role>` timer (True when `key` was one)."""
        if not key.startswith("replace:"):
            return False
        role = key.partition(":")[2]
        if role == "sync-events":  # SyncEvents went unanswered: start what waits anyway
            self._start_pending_groups()
        elif self.state == "running" and self.children.by_role(role) is None:
            self._replace(role)
        return True

    # -- RemotingServer --------------------------------------------------------------------------
    def remoting_start(self, port: int, fast_port: int | None) -> StartRemoting:
        """The StartRemoting of this broker (generation rs_generation)."""
        msg = self.start_msg
        assert msg is not None  # started
        bc = msg.broker_config
        code_groups = {code: g.name for g in self.groups for code in g.codes}
        return StartRemoting(
            msg.host, port, dict(self.channel_addrs), code_groups,
            self.PERSONALITY.DEFAULT_GROUP, msg.idle_s, msg.max_frame, fast_port,
            self.channel_token, bc.maxConnections,
            self.rs_generation << CONN_ID_GENERATION_SHIFT,
            frozenset(g.name for g in self.groups if g.spin_us > 0),
            frozenset(g.name for g in self.groups if g.direct_replies),
            bc.directReplyToLocalClients,
            frozenset(g.name for g in self.groups if g.holds_requests),
            msg.tls,
        )  # fmt: skip

    def _replace_remoting(self) -> None:
        self.rs_generation += 1
        self.remoting = self.createActor("actors.remoting.actor.RemotingServer")
        self.track(REMOTING, self.remoting)
        # the same ports: the VIP one as bound (-1: there was none)
        self.send(self.remoting, self.remoting_start(self.port, self.fast_port or -1))
        if self.pending_groups:  # SyncEvents went to the dead one: no answer will come
            self._start_pending_groups()

    # -- processors ------------------------------------------------------------------------------
    def _replace_processor(self, group: str) -> None:
        self.channel_addrs.pop(group, None)
        addr = self.createActor(self.PROCESSOR_ACTOR)
        self.processors[group] = addr
        self.track(group, addr)
        if group == "send" and self.indexer is not None:
            self.release(INDEX)  # the new writer's recovery waits for the index lock
            self.send(self.indexer, ActorExitRequest())
            self.indexer = None
        self.pending_groups.add(group)
        if self.remoting is not None and self.children.by_role(REMOTING) is not None:
            self.send(self.remoting, SyncEvents())  # events it holds first: then the snapshot
            self.schedule("replace:sync-events", SYNC_EVENTS_WAIT_MS)
        else:
            self._start_pending_groups()

    def _start_pending_groups(self) -> None:
        pending, self.pending_groups = self.pending_groups, set()
        for group in sorted(pending):
            if group in self.processors:
                self._start_processor(group)

    def _processor_ready(self, group: str, channel_addr: ChannelAddr) -> None:
        self.channel_addrs[group] = channel_addr
        if self.remoting is not None:
            self.send(self.remoting, ConnectProcessor(group, channel_addr, self.channel_token))
        self.wire_links(group)
        if group == "send":
            self._start_indexer()
        self._replaced(group)

    # -- links between the services and the processors (actors.runtime.links) -------------------
    def wire_links(self, ready: str | None) -> None:
        """Tell each actor that opens a link where its peer listens: every link (None), or
        those of `ready`, a role that listens again (a replacement), opened by it or to it. An
        opener must be listening itself (a replacement is told once it is)."""
        token = self.channel_token
        for g in self.groups:
            actor = self.processors.get(g.name)
            if actor is None or g.name not in self.channel_addrs:
                continue
            for peer in g.links:
                addr = self.channel_addrs.get(peer)
                if addr is not None and ready in (None, g.name, peer):
                    self.send(actor, ConnectLink(peer, addr, token))
        if self.ha is not None and self.ha_port:
            for peer in HA_LINKS:
                addr = self.channel_addrs.get(peer)
                if addr is not None and ready in (None, HA, peer):
                    self.send(self.ha, ConnectLink(peer, addr, token))

    # -- giving up -------------------------------------------------------------------------------
    def _give_up(self, role: str, reason: str) -> None:
        """Stop the broker (no half broker) and tell the RoleSupervisor above."""
        assert self.start_msg is not None  # running
        name = self.start_msg.broker_config.brokerName
        log.critical("role=%s keeps failing (%s): stopping broker %s", role, reason, name)
        if role == REMOTING:
            self.remoting = None
        self.processors.pop(role, None)  # e.g. no store shutdown through a dead writer
        if self.requester is not None:
            self.send(self.requester, RoleFailed(f"{name}/{role}", reason))
        self._stop(None)

    def answer_stop_when_stopped(self, sender: ActorAddress) -> bool:
        """A StopBroker after the broker stopped itself: answered at once."""
        if self.state != "stopped":
            return False
        self.send(sender, BrokerStopped(False, "the broker had stopped: a role kept failing"))
        return True
