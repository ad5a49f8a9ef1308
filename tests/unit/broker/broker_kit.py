"""Test harness: every broker core wired through a real BrokerControllerCore and a real store,
the service links in memory (their records through the real encoding)."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

from actors.broker.config import BrokerConfig
from actors.broker.context import BrokerContext
from actors.broker.controller import BrokerControllerCore
from actors.broker.processors import BROKER_PROCESSOR_GROUPS, group_for_code
from actors.core import BatchEndCore, ClosingCore, LinkedCore, Request, StoreShutdownCore
from actors.runtime.channel import REQUEST, Channel
from actors.runtime.link_records import decode, encode
from actors.runtime.links import LINK_CONN_IDS, OTHER_LINK_CONN_ID
from actors.runtime.processor_host import ChannelOutbox, ProcessorHost
from protocol.command import RemotingCommand
from store.config import StoreConfig
from store.message_store import DefaultMessageStore
from tests.unit.namesrv.namesrv_kit import wire_cmd as wire_cmd  # re-exported


class FakeOutbox:
    """Collects what a core sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, RemotingCommand]] = []
        self.closed: list[int] = []
        self.calls: list[int] = []  # opaques sent with call()

    def send(self, conn_id: int, cmd: RemotingCommand) -> None:
        self.sent.append((conn_id, cmd))

    def call(self, conn_id: int, cmd: RemotingCommand) -> None:
        self.sent.append((conn_id, cmd))
        self.calls.append(cmd.opaque)

    def close_conn(self, conn_id: int) -> None:
        self.closed.append(conn_id)

    def send_frame(self, conn_id: int, encoded: bytes) -> bool:
        self.sent.append((conn_id, RemotingCommand.decode(memoryview(encoded)[4:])))
        return True

    def take(self) -> list[tuple[int, RemotingCommand]]:
        out, self.sent = self.sent, []
        return out


class KitLink:
    """actors.core.Link in memory: what is sent waits in the kit's queue until pump()."""

    def __init__(self, kit: Broker, owner: str, peer: str, conn_id: int) -> None:
        self.kit = kit
        self.owner = owner  # the group whose core holds this end
        self.peer = peer
        self.conn_id = conn_id
        self.other: KitLink | None = None
        self.up = True

    @property
    def role(self) -> str:
        return self.peer

    @property
    def alive(self) -> bool:
        return self.up

    def send(self, record: Any) -> None:
        if self.up:
            self.kit.queue.append(("record", self, encode(record)))

    def request(self, cmd: RemotingCommand) -> None:
        if self.up:
            self.kit.queue.append(("request", self, cmd.encode()))


class Broker:
    """All processor cores and services of one broker plus the controller, events, links."""

    def __init__(
        self,
        root: str,
        sync_flush: bool = False,
        runtime_dir: str = "",
        store: dict[str, Any] | None = None,
        **bc: Any,
    ) -> None:
        """bc: BrokerConfig fields; store: StoreConfig fields over the kit's small files."""
        self.bc = BrokerConfig(namesrvAddr="127.0.0.1:9876", **bc)
        self.sc = StoreConfig(
            storePathRootDir=root,
            mappedFileSizeCommitLog=1 << 20,
            mappedFileSizeConsumeQueue=20 * 1000,
            maxIndexNum=1000,
            maxHashSlotNum=100,
            flushDiskType="SYNC_FLUSH" if sync_flush else "ASYNC_FLUSH",
            **(store or {}),
        )
        self.store = DefaultMessageStore(self.sc)
        assert self.store.load(0)
        self.store.start(0)
        self.controller = BrokerControllerCore(self.bc, self.sc)
        # the shared consumer offset table, as the controller actor makes it for its broker
        offsets_dir = os.path.join(root, "run")
        os.makedirs(offsets_dir, exist_ok=True)
        self.controller.load(0, offsets_dir)
        snap = self.controller.snapshot()
        self.outbox = FakeOutbox()
        self.ctxs: dict[str, BrokerContext] = {}
        self.cores: dict[str, Any] = {}
        self.groups = [g for g in BROKER_PROCESSOR_GROUPS
                       if g.runs_on is None or g.runs_on(self.bc)]  # fmt: skip
        self.queue: list[tuple[str, KitLink, Any]] = []
        self.links: list[KitLink] = []
        self.closed = False
        for g in self.groups:
            ctx = BrokerContext(
                self.bc, self.sc, group=g.name, outbox=self.outbox, store=self.store
            )
            ctx.load_snapshot(snap)
            ctx.runtime_dir = runtime_dir  # what the processor actor sets (wake pipes go there)
            self.ctxs[g.name] = ctx
            self.cores[g.name] = g.build(ctx)
        for g in self.groups:
            for peer in g.links:
                if peer in self.cores:
                    self.link(g.name, peer)
        self.pump(0)

    def link(self, opener: str, peer: str) -> tuple[KitLink, KitLink]:
        """Open a link as the runtime does (the hello's round trip included)."""
        a = KitLink(self, opener, peer, LINK_CONN_IDS.get(opener, OTHER_LINK_CONN_ID))
        b = KitLink(self, peer, opener, 0)
        a.other, b.other = b, a
        self.links += [a, b]
        for end in (a, b):
            core = self.cores[end.owner]
            if isinstance(core, LinkedCore):
                core.on_link(end, 0)
        return a, b

    def end(self, owner: str, peer: str) -> KitLink:
        """`owner`'s live end of its link with `peer`."""
        [link] = [e for e in self.links if e.owner == owner and e.peer == peer and e.up]
        return link

    def tick(self, now_ms: int) -> None:
        """Every core's timers, then pump (what the actors' tick timers do)."""
        for core in self.cores.values():
            core.tick(now_ms)
        self.pump(now_ms)

    def cut(self, group: str, now_ms: int = 0) -> None:
        """`group`'s actor died: the other end of each of its links sees it go."""
        for end in [e for e in self.links if e.up and e.other is not None
                    and e.other.owner == group]:  # fmt: skip
            end.up = False
            assert end.other is not None
            end.other.up = False
            core = self.cores[end.owner]
            if isinstance(core, LinkedCore):
                core.on_link_lost(end, now_ms)
        self.queue = [q for q in self.queue if q[1].up]

    def close(self) -> None:
        """Clean shutdown as the runtime does it: core hooks first, then the store (once)."""
        if self.closed:
            return
        self.closed = True
        for core in self.cores.values():
            if isinstance(core, StoreShutdownCore):
                core.before_store_shutdown(0)
            if isinstance(core, ClosingCore):
                core.close()
        self.store.shutdown(0)

    def pump(self, now_ms: int = 0) -> None:
        """End the batch of every core, then move events through the controller and the link
        records and requests to their peers, until nothing moves (bounded)."""
        for _ in range(10_000):
            for core in self.cores.values():
                if isinstance(core, BatchEndCore):
                    core.end_batch(now_ms)
            self._events(now_ms)
            if not self.queue:
                return
            queue, self.queue = self.queue, []
            for kind, link, data in queue:
                self._deliver(kind, link, data, now_ms)
        raise AssertionError("the links never settled")

    def _deliver(self, kind: str, link: KitLink, data: Any, now_ms: int) -> None:
        other = link.other
        if other is None or not other.up:
            return
        if kind == "record":
            self.cores[other.owner].on_link_record(other, decode(data), now_ms)
        elif kind == "request":
            req = Request(link.conn_id, ("127.0.0.1", 0), RemotingCommand.decode(data[4:]), 0)
            resp = self.cores[other.owner].process(req, now_ms)
            if resp is not None:
                self.queue.append(("response", other, resp.encode()))
        else:
            self.cores[other.owner].on_link_response(other, RemotingCommand.decode(data[4:]),
                                                     now_ms)  # fmt: skip

    def _events(self, now_ms: int) -> None:
        for name, ctx in self.ctxs.items():
            events = ctx.drain_events()
            if events:
                fwd = self.controller.apply_events(events, name, now_ms)
                for target, evs in fwd.items():
                    if target not in self.ctxs:  # a service this broker does not run
                        continue
                    for ev in evs:
                        self.ctxs[target].apply(ev, now_ms)
                # registration "done" at once: release replies held for it
                for origin, token in self.controller.take_barriers():
                    self.cores[origin].release(token, now_ms)

    def call(
        self,
        code: int,
        ext: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        now_ms: int = 0,
        conn_id: int = 1,
        peer: tuple[str, int] = ("127.0.0.1", 40000),
        **kw: Any,
    ) -> RemotingCommand | None:
        """Route by code like the RemotingServer, run the core, pump events."""
        req = Request(conn_id, peer, wire_cmd(code, ext, body, **kw), 0)
        resp = self.cores[group_for_code(code)].process(req, now_ms)
        self.pump(now_ms)
        return resp


def send_ext(
    topic: str,
    *,
    queue_id: int = 0,
    props: str = "UNIQ_KEY\x01ABC\x02WAIT\x01true",
    group: str = "PG",
    **extra: Any,
) -> dict[str, Any]:
    """A SEND_MESSAGE_V2 header as ali-ons sends it (numeric values, keys a-l)."""
    ext: dict[str, Any] = {
        "a": group,
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": queue_id,
        "f": 0,
        "g": 1700000000000,
        "h": 0,
        "i": props,
        "j": 0,
        "k": False,
    }
    ext.update(extra)
    return ext


def pull_ext(
    topic: str,
    group: str = "CG",
    *,
    queue_id: int = 0,
    offset: int = 0,
    sys_flag: int = 2,
    sub: str | None = None,
    commit: int = 0,
    suspend: int = 15000,
    sub_version: int = 0,
) -> dict[str, Any]:
    """A PULL_MESSAGE header as the C++ client sends it (string numbers mixed in)."""
    ext: dict[str, Any] = {
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "x=",
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": str(offset),
        "maxMsgNums": 32,
        "sysFlag": sys_flag,
        "commitOffset": str(commit),
        "suspendTimeoutMillis": str(suspend),
        "subVersion": str(sub_version),
    }
    if sub is not None:
        ext["subscription"] = sub
    return ext


def heartbeat_body(
    client_id: str, group: str, topic: str, tags: list[str] | None = None, sub_version: int = 1
) -> bytes:
    """A Java-style HeartbeatData with one consumer group."""
    from protocol.record import java_string_hash

    tags = tags or []
    subs = [
        {
            "classFilterMode": False,
            "codeSet": [java_string_hash(t) for t in tags],
            "expressionType": "TAG",
            "subString": " || ".join(tags) or "*",
            "subVersion": sub_version,
            "tagsSet": tags,
            "topic": topic,
        },
        {
            "classFilterMode": False,
            "codeSet": [],
            "expressionType": "TAG",
            "subString": "*",
            "subVersion": sub_version,
            "tagsSet": [],
            "topic": f"%RETRY%{group}",
        },
    ]
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "consumeType": "CONSUME_PASSIVELY",
                    "groupName": group,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": subs,
                    "unitMode": False,
                }
            ],
            "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
        }
    ).encode()


FAST_PEER = ("10.1.2.3", 40000)


class FastPathSide:
    """One broker group's core driven through a ProcessorHost over a real channel, with or
    without its fast path (`taken` counts the requests the fast path answered)."""

    def __init__(self, broker: Broker, group: str, fast: bool) -> None:
        self.broker = broker
        self.core = broker.cores[group]
        self.taken = 0
        real = self.core.fast_path

        def counting(frame: memoryview, conn_id: int, peer: tuple[str, int], now_ms: int
                     ) -> bytes | None:  # fmt: skip
            out = real(frame, conn_id, peer, now_ms)
            self.taken += out is not None
            return out

        self.host = ProcessorHost(group, self.core, ChannelOutbox(), 10**9)
        self.host.fast = counting if fast else None
        self.a, self.b = socket.socketpair()
        self.ch = Channel(self.a, group)

    def run(self, frame: bytes, now_ms: int) -> bytes:
        """Handle one request frame (no length prefix); the records written back, as bytes."""
        self.ch.out.clear()
        rec = (REQUEST, 3, time.monotonic_ns(), FAST_PEER, memoryview(frame))
        self.host.handle(self.ch, [rec], 0)
        self.broker.pump(now_ms)
        return bytes(self.ch.out)

    def close(self) -> None:
        """Close the channel and the broker."""
        self.ch.close()
        self.b.close()
        self.broker.close()
