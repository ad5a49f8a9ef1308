"""PullMessageServiceActor: client/impl/consumer/PullMessageService.java (with
PullAPIWrapper.pullKernelImpl's request and MQClientAPIImpl.pullMessageAsync), RocketMQ 4.9.x.

One per client instance with consumers. The consumer cores in the user's process own the
ProcessQueues, the pull requests and the flow-control gates (DefaultMQPushConsumerImpl.
pullMessage's); the next pull of a queue is the core's decision, made on the answer as Java's
PullCallback makes it. This actor owns the making of the pull connections:
- over plain TCP, asked for a broker (ConnWanted), it connects and hands the connection to the
  user's process (ConnShared, SCM_RIGHTS), keeping no copy, or says why it could not
  (ConnFailed). The user's I/O thread then writes that broker's pulls and reads their answers
  itself, as Netty's I/O thread does for Java's PullMessageService (shared_pull_connection);
- over TLS, where a session cannot cross a process, it is the pulls' writer and reader: the
  user's process sends it PullCommands over the channel, many per record, and it sends each as
  an async PULL_MESSAGE on its own broker connections (long polling: the broker holds it up to
  the command's suspend time, 15 s for a push consumer, and the call times out after 30 s),
  in the order they arrive, each broker's on its one connection, and reads the answers
  straight into shared rings (actors.client.frame_ring): a PULL_AT record says where the body
  lies, and the ring space comes back with the user's RingRelease.
It keeps nothing between a command and its answer. No Thespian message is sent per pull or
per message; a busy actor serves its sockets from its own epoll between Thespian turns
(WatchingActor's linger loop).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from typing import Any, Final

from actors.client import client_channel as ch
from actors.client.client_requests import process_pull_response
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.messages import PullServiceStarted, ServiceStartFailed, StartPullService
from actors.client.errors import MQClientError
from actors.client.frame_ring import PullRings, SharedRing
from actors.client.records import PullResult, PullStatus
from actors.client.remoting_conn import open_connection
from actors.client.service_thread_actor import ServiceThreadActor
from protocol.command import next_opaque

log = logging.getLogger(__name__)

SCAN_MS: Final = 200.0
RESUME_RETRY_MS: Final = 2.0  # how often a ring the channel could not take is offered again


class PullMessageServiceActor(ServiceThreadActor):
    """Executes the pull requests of one client instance's consumers."""

    LINGER_IDLE_MS = 3.0
    LINGER_CAP_MS = 50.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pulls = 0
        self.in_pass = False  # in on_ready: what is written waits for the pass's end
        self.rings: PullRings | None = None
        self.frames: cc.PullCommandFrames | None = None  # the TLS pulls' frames
        self.serials = itertools.count(1)  # the connections handed over
        self._paused_watch: frozenset[object] = frozenset()  # the paused readers last watched

    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartPullService):
            try:
                self.rings = PullRings(self._announce, self._retired)
                self.frames = cc.PullCommandFrames(msg.config.credentials,
                                                   msg.config.serialize_type)  # fmt: skip
                self._connect(msg.config, msg.channel_path, f"pull:{msg.client_id}",
                              rings=self.rings)  # fmt: skip
            except Exception as exc:
                log.exception("PullMessageService failed to start")
                self.send(sender, ServiceStartFailed(f"{type(exc).__name__}: {exc}"))
                return
            self._rewatch()
            self.schedule("scan", SCAN_MS)
            log.info("PullMessageService of %s started", msg.client_id)
            self.send(sender, PullServiceStarted(os.getpid(), os.getpgid(0)))

    def on_ready(self, fds: list[int]) -> None:
        """A readiness pass: its pulls and forwarded answers are written once, at its end
        (ServiceThreadActor.on_ready flushes both sides after the pass)."""
        remoting = self.remoting
        self.in_pass = True
        if remoting is not None:
            remoting.hold_writes = True
        try:
            super().on_ready(fds)
        finally:
            self.in_pass = False
            if remoting is not None:
                remoting.hold_writes = False
            self._watch_paused()

    def _hand_over(self, addr: str) -> None:
        """Connect to addr and hand the connection to the user's process, behind what is
        queued for it; this copy is closed (the user's process is its one writer and reader);
        ConnFailed when no connection is made."""
        end, api = self.channel, self.api
        if end is None or end.closed or api is None:
            return
        try:
            conn = open_connection(addr, api.remoting.connect_timeout_s, None)
        except MQClientError as exc:
            log.info("pull connection to %s not made: %s", addr, exc)
            failed = cc.ConnFailed(addr, str(exc))
            end.queue(failed.KIND, failed.encode())
            return
        try:
            rec = cc.ConnShared(next(self.serials), addr)
            if not end.send_with_fds(ch.encode_record(rec.KIND, rec.encode()), [conn.fd]):
                log.warning("pull connection to %s not handed over: the channel is full", addr)
                failed = cc.ConnFailed(addr, "the connection could not be handed over")
                end.queue(failed.KIND, failed.encode())  # its pulls fail, and ask again
        finally:
            conn.sock.close()  # the record carries its own copy

    def _announce(self, ring: SharedRing) -> bool:
        """Hand a ring's memfd to the user's process, behind what is queued for it."""
        end = self.channel
        if end is None or end.closed or ring.fd is None:
            return False
        rec = cc.RingShared(ring.ring_id, ring.space.size)
        if not end.send_with_fds(ch.encode_record(rec.KIND, rec.encode()), [ring.fd]):
            return False
        os.close(ring.fd)
        ring.fd = None
        return True

    def _retired(self, ring_id: int) -> None:
        """A ring the user's process mapped is closed: it unmaps it (after the PULL_ATs in it,
        written before)."""
        end = self.channel
        if end is not None and not end.closed:
            rec = cc.RingRetired(ring_id)
            end.queue(rec.KIND, rec.encode())
            if not self.in_pass:
                self._after_pass()

    def _watch_paused(self) -> None:
        """Stop watching connections that wait for ring space, watch them again once they
        can read: after a release (the pass that read it ends here), or, for a ring the
        channel could not take, on the retry timer."""
        rings, remoting = self.rings, self.remoting
        if rings is None or remoting is None or not (rings.paused or self._paused_watch):
            return
        if rings.paused:
            remoting.resume_ring_reads()
        paused = frozenset(rings.paused)
        if paused != self._paused_watch:
            self._paused_watch = paused
            self._rewatch()
        if paused and rings.announce_failed:
            self.schedule("resume", RESUME_RETRY_MS)

    def _read_channel(self, end: ch.ChannelEnd) -> None:
        records = end.read_records()
        if records is None:
            log.info("PullMessageService: the user's process closed the channel")
            end.close()
            self.channel = None
            self._rewatch()
            return
        for kind, payload in records:
            try:
                rec = ch.read_record(kind, payload)
            except ch.ChannelError as exc:
                log.warning("pull channel: %s", exc)
                continue
            if isinstance(rec, cc.Pull):
                for cmd in rec.commands:
                    self._pull(cmd)
            elif isinstance(rec, cc.ConnWanted):
                self._hand_over(rec.addr)
            elif isinstance(rec, cc.RingRelease):
                self._release(rec)
            elif isinstance(rec, cc.RingRefused):
                log.error("pull ring %d: the user's process could not map it; its answers are "
                          "copied", rec.ring_id)  # fmt: skip
                assert self.rings is not None
                self.rings.refuse(rec.ring_id)
            elif not isinstance(rec, ch.Bye):
                log.warning("pull channel: unexpected %s", type(rec).__name__)

    def _release(self, rec: cc.RingRelease) -> None:
        rings = self.rings
        assert rings is not None
        for ring_id, token in rec.tokens:
            try:
                rings.release(ring_id, token)
            except ValueError as exc:  # nothing changed: a wrong token frees nothing
                log.error("pull ring release of (%d, %d): %s", ring_id, token, exc)

    def _pull(self, cmd: cc.PullCommand) -> None:
        api = self.api
        assert api is not None
        self.pulls += 1
        rid = cmd.rid

        def done(result: PullResult | None, err: MQClientError | None) -> None:
            end = self.channel
            if end is None:
                return
            answer, tail = cc.pull_answer(rid, result, err)
            if result is not None and result.status is PullStatus.FOUND and \
                    isinstance(tail, memoryview) and self.rings is not None:
                ref = self.rings.claim(tail)
                if ref is not None:  # the body stays in the ring: say where
                    end.queue(cc.PULL_AT, cc.pull_result_head(*answer), cc.pull_at_ref(ref))
                    if not self.in_pass:
                        self._after_pass()
                    return
            # copied once, into the channel's buffer
            end.queue(cc.PULL_RESULT, cc.pull_result_head(*answer), tail)
            if not self.in_pass:
                self._after_pass()  # a timeout or a refused write: nobody else flushes now

        opaque = next_opaque()
        assert self.frames is not None
        frame = self.frames.frame(cmd, opaque)
        try:
            api.call_frame(cmd.addr, opaque, frame, cmd.timeout_ms, process_pull_response, done)
        except MQClientError as exc:  # could not even be written (connect refused, ...)
            done(None, exc)

    def on_exit(self) -> None:
        super().on_exit()
        if self.rings is not None:
            self.rings.close()

    def on_timer(self, key: str) -> None:
        if key == "resume":
            self._watch_paused()
        if key == "scan":
            if self.remoting is not None:
                self.remoting.scan_response_table(time.monotonic())
            self.schedule("scan", SCAN_MS)
        self._after_pass()
