"""PullMessageServiceActor: client/impl/consumer/PullMessageService.java (with
PullAPIWrapper.pullKernelImpl's request and MQClientAPIImpl.pullMessageAsync), RocketMQ 4.9.x.

One per client instance with consumers. The consumer cores in the user's process decide when
a queue starts being pulled (their flow control, DefaultMQPushConsumerImpl.pullMessage's gates)
and send the PullRequests here over the channel, many per record; this actor sends each as an
async PULL_MESSAGE on its own broker connections (long polling: the broker holds it up to the
request's suspend time, 15 s for a push consumer, and the call times out after 30 s) and
forwards every answer, its pull body untouched, back over the channel. A push consumer's pull
may come as a chain (pull_flow_control.py): then, as Java's PullCallback does, this actor
sends the queue's next pull itself the moment an answer arrives, while the gates pass on the
ProcessQueue figures the user's process reports back, so a busy user's process does not delay
the next pull. No Thespian message is
sent per pull or per message; a busy actor serves its sockets from its own epoll between
Thespian turns (WatchingActor's linger loop).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Final

from actors.client import client_channel as ch
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.messages import PullServiceStarted, ServiceStartFailed, StartPullService
from actors.client.consumer.pull_flow_control import (
    PullChain,
    PullChains,
    PullLimits,
    scan_pull_body,
)
from actors.client.errors import MQBrokerError, MQClientError
from actors.client.records import PullResult, PullStatus
from actors.client.service_thread_actor import ServiceThreadActor
from protocol.codes import MASTER_ID, PullSysFlag
from protocol.headers import PullMessageRequestHeader

log = logging.getLogger(__name__)

SCAN_MS: Final = 200.0


class PullMessageServiceActor(ServiceThreadActor):
    """Executes the pull requests of one client instance's consumers."""

    LINGER_IDLE_MS = 3.0
    LINGER_CAP_MS = 50.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pulls = 0
        self.chains = PullChains()
        self.in_pass = False  # in on_ready: what is written waits for the pass's end

    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartPullService):
            try:
                self._connect(msg.config, msg.channel_path, f"pull:{msg.client_id}")
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

    def _read_channel(self, end: ch.ChannelEnd) -> None:
        records = end.read_records()
        if records is None:
            log.info("PullMessageService: the user's process closed the channel")
            end.close()
            self.channel = None
            self._rewatch()
            return
        chains = self.chains
        for kind, payload in records:
            if kind == cc.PULL:
                for row in ch.unpack(payload):
                    self._start(row)
            elif kind == cc.PROGRESS:
                for rid, seq, count, size, first, commit in ch.unpack(payload):
                    c = chains.chains.get(rid)
                    if c is not None:
                        c.snapshot(seq, count, size, first, commit)
            elif kind == cc.STOP:
                token, rids = ch.unpack(payload)
                for rid in rids:
                    chains.stop(rid)
                end.send(cc.STOPPED, ch.pack([token]))
            elif kind != ch.BYE:
                log.warning("pull channel: unknown record kind %d", kind)

    def _start(self, row: list[Any]) -> None:
        """A pull from the user's process; a chain when it lets this actor pull again."""
        chain = row[14] if len(row) > 14 else None
        if chain is not None:
            (broker_id, seq, count, size, first, commit, q_count, q_mib, span, b_count,
             b_mib) = chain  # fmt: skip
            self.chains.start(row[0], PullChain(
                row[:14], row[2], seq, count, size, first, commit,
                PullLimits(q_count, q_mib, span, b_count, b_mib), broker_id))
        self._pull(row)

    def _pull(self, row: list[Any]) -> None:
        (rid, addr, group, topic, qid, offset, max_nums, sys_flag, commit_offset, suspend_ms,
         subscription, sub_version, expression_type, timeout_ms) = row[:14]
        header = PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=qid, queue_offset=offset,
            max_msg_nums=max_nums, sys_flag=sys_flag, commit_offset=commit_offset,
            suspend_timeout_millis=suspend_ms, sub_version=sub_version,
            subscription=subscription, expression_type=expression_type)
        api = self.api
        assert api is not None
        self.pulls += 1

        def done(result: PullResult | None, err: MQClientError | None) -> None:
            end = self.channel
            if end is None:
                return
            tail: bytes | memoryview
            if result is not None:
                repulled = self._repull(rid, result)
                head = cc.pull_result_head(
                    rid, result.status.value, result.next_begin_offset, result.min_offset,
                    result.max_offset, result.suggest_which_broker_id, repulled)
                tail = result.body
            else:
                self.chains.stop(rid)
                if isinstance(err, MQBrokerError):
                    head = cc.pull_result_head(rid, cc.BROKER_ERROR, err.code, 0, 0, 0)
                    tail = (err.remark or "").encode()
                else:
                    head = cc.pull_result_head(rid, cc.NO_ANSWER, 0, 0, 0, 0)
                    tail = str(err or "no answer").encode()
            end.queue(cc.PULL_RESULT, head, tail)  # copied once, into the channel's buffer
            if not self.in_pass:
                self._after_pass()  # a timeout or a refused write: nobody else flushes now

        try:
            api.pull_message(addr, header, timeout_ms, callback=done)
        except MQClientError as exc:  # could not even be written (connect refused, ...)
            done(None, exc)

    def _repull(self, rid: int, result: PullResult) -> bool:
        """The PullCallback's executePullRequestImmediately, when the gates allow it."""
        chains = self.chains
        chain = chains.chains.get(rid)
        if chain is None:
            return False
        status = result.status
        if status is PullStatus.FOUND:
            chain.found(*scan_pull_body(result.body))
        elif status not in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            chains.stop(rid)  # OFFSET_ILLEGAL: the user's process fixes the offset
            return False
        if result.suggest_which_broker_id != chain.broker_id or not chains.may_repull(chain):
            chains.stop(rid)  # the user's process runs the gates (and picks the broker)
            return False
        row = chain.row
        commit = chain.commit
        row[5] = result.next_begin_offset
        row[8] = commit
        if commit > 0 and chain.broker_id == MASTER_ID:
            row[7] |= PullSysFlag.FLAG_COMMIT_OFFSET
        else:
            row[7] &= ~PullSysFlag.FLAG_COMMIT_OFFSET
        self._pull(row)
        return True

    def on_timer(self, key: str) -> None:
        if key == "scan":
            if self.remoting is not None:
                self.remoting.scan_response_table(time.monotonic())
            self.schedule("scan", SCAN_MS)
        self._after_pass()
