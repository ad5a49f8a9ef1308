"""The pulling of a consumer core: pullMessage's flow-control gates and the PullCallback.

Mirrors client/impl/consumer/DefaultMQPushConsumerImpl.java pullMessage (its gates and the
PullCallback it passes to PullAPIWrapper.pullKernelImpl), RocketMQ 4.9.x; the lite pull
consumer's PullTaskImpl reuses it with its own decisions (PullHost).

PullCallback owns the pulls of one consumer core: the one pull of each queue that is out
(`pending`, by request id) and the PullAPIWrapper's choice of broker node; it reads the core's
ProcessQueues and settings (PullHost) and asks the core's kind for its gate, its pull flags,
where pulled messages go and what OFFSET_ILLEGAL does. The pull actor only
executes PullCommands; the next pull of a queue is decided here, on the answer of the last
(the I/O thread runs the PullCallback, as Java's callback thread does).

Java decodes a FOUND answer, puts it in the ProcessQueue, hands it to the consume service and
then pulls again; its decode costs little. Ours costs about 2 us a message, so an answer of
32 held the queue's next pull back by some 70 us, and the answers of all queues, read
together, left together: the broker then served the whole round while the user's process
waited, and the other way round. So a dense answer (more than one message, no filtered
range: at most pullBatchSize offsets; no compressed body, whose inflated size the decode
alone knows) is first counted in its ProcessQueue by its bounds (ProcessQueue.expect: its
records, its size, its offset range), the gates run on that and the next pull is sent at
once; then the answer is decoded and put, which replaces the bounds with what was put. The
gates see the figures Java's see after the put (a bound is above the real figure only by
client-side filtered messages and record headers). A single message (the latency case) keeps
Java's order, its handler first, and so does a kind whose gates read more than its
ProcessQueues (the lite pull consumer's count its consume cache, filled after the decode).
A batch that cannot be handled is pulled again pullTimeDelayMillsWhenException later, as
Java's onException does; when its next pull had left, that pull's answer does it instead.

A push consumer's pulls carry its commit offset to the broker, which stores it when it first
processes the pull, however long it then holds it. A commit made while a queue's pull is out
(a revoke, a close, a reset) could be overtaken by that older offset, so `settle_commits`
first sends the final offset the same way, as a pull that does not wait: the pull actor
writes it after the one out, on the same connection, and its answer acknowledges that the
broker has stored it (both pulls are served in order by the pull processor of one
connection on actormq; a Java broker's pull threads take them in order of arrival).
"""

from __future__ import annotations

import logging
import time
from typing import Final, Protocol

from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.consumer_config import ServiceState
from actors.client.consumer.consumer_scheduler import ConsumerScheduler
from actors.client.consumer.message_decoder import (
    PullBodyScan,
    decode_pull_messages,
    scan_pull_body,
)
from actors.client.consumer.mq_consumer_inner import ConsumerState
from actors.client.consumer.process_queue import MIB, ProcessQueue
from actors.client.consumer.pull_api_wrapper import PullAPIWrapper
from actors.client.consumer.pull_request import PullRequest
from actors.client.errors import MQClientError
from actors.client.records import MessageExt, PullStatus
from protocol.bodies import MessageQueue, SubscriptionData
from protocol.codes import RETRY_GROUP_TOPIC_PREFIX, PullSysFlag, ResponseCode

log = logging.getLogger(__name__)

PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL: Final = 50  # PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL
PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL: Final = 20
PULL_TIME_DELAY_MS_WHEN_SUSPEND: Final = 1000  # paused
HEARTBEAT_RACE: Final = frozenset({ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                   ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                   ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST})
HEARTBEAT_RACE_S: Final = 10.0  # after a start or a subscription change
HEARTBEAT_RACE_RETRY_MS: Final = 100  # a pull sent just before carries an older commit offset
# the broker lost this client's registration (restarted, or the connection closed): the
# heartbeat goes out at once (InstanceHandle.heartbeat_broker) and the pull is tried again
# HEARTBEAT_RACE_RETRY_MS later, this many times in a row at most, then at the usual delay
UNREGISTERED: Final = frozenset({ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                 ResponseCode.SUBSCRIPTION_NOT_LATEST})
UNREGISTERED_FAST_RETRIES: Final = 10
SETTLE_TIMEOUT_MS: Final = 3000  # a commit's pull: the broker answers it at once


def now_ms() -> int:
    """Wall clock in ms."""
    return time.time_ns() // 1_000_000


class PullHost(ConsumerState, Protocol):
    """What the pulling reads of its consumer core besides its ConsumerState, and the
    decisions its kind makes (DefaultMQPushConsumerImpl, DefaultLitePullConsumerImpl)."""

    @property
    def state(self) -> ServiceState: ...

    @property
    def paused(self) -> bool: ...

    @property
    def subscriptions(self) -> dict[str, SubscriptionData]: ...

    @property
    def scheduler(self) -> ConsumerScheduler: ...

    @property
    def subs_changed_at(self) -> float: ...

    @property
    def queue_thresholds(self) -> tuple[int, int]: ...

    def correct_tags_offset(self) -> bool:
        """correctTagsOffset: a NO_NEW / NO_MATCHED answer with nothing cached moves the
        consume offset to the answer's next offset (the push consumer; the lite pull
        consumer's offset is what poll() returned and the user committed, so only its pull
        position moves)."""
        ...

    def pull_gate(self, req: PullRequest) -> bool:
        """The kind's own flow control; False when it rescheduled the request."""
        ...

    def pull_spec(self, mq: MessageQueue, sub: SubscriptionData, slave: bool
                  ) -> tuple[int, int, str | None, int]:  # fmt: skip
        """(sys_flag, commit offset, subscription sent or None, suspend ms) of a pull."""
        ...

    def dispatch_pulled(self, msgs: list[MessageExt], pq: ProcessQueue[MessageExt],
                        mq: MessageQueue, dispatch_to_consume: bool) -> None:  # fmt: skip
        """Hand pulled messages to what consumes them."""
        ...

    def pull_interval_ms(self) -> int:
        """pullInterval (push only; 0 for the others)."""
        ...

    def gates_read_process_queue(self) -> bool:
        """Whether the kind's gates read only its ProcessQueues (a batch counted by
        ProcessQueue.expect is seen by them): then a dense answer pulls again before its
        decode."""
        ...

    def offset_illegal(self, req: PullRequest, next_begin: int) -> None:
        """An OFFSET_ILLEGAL answer (the push consumer drops the queue, the lite pull
        consumer pulls on from the broker's offset)."""
        ...


class PullCallback:
    """pullMessage and its PullCallback for one consumer core: owns the pulls that are out
    (`pending`, by request id) and the PullAPIWrapper's pull-from-which-node table."""

    def __init__(self, host: PullHost) -> None:
        self.host = host
        self.pending: dict[int, PullRequest] = {}
        self.pull_api = PullAPIWrapper(host.group)

    @property
    def group(self) -> str:
        """The consumer group pulling."""
        return self.host.group

    def settle_commits(self, finals: list[tuple[ProcessQueue[MessageExt], int]]) -> None:
        """Before committing each queue's final offset: where that queue's pull is out with
        another commit offset, send the final one after it as a pull that does not wait, and
        wait (bounded) for those answers: the older offset cannot land after the final one."""
        host = self.host
        services = host.services
        if services is None or not finals:
            return
        final_of = {id(pq): off for pq, off in finals}
        cmds = []
        for req in list(self.pending.values()):
            out = req.out
            off = final_of.get(id(req.pq))
            if out is None or off is None or not out.sys_flag & PullSysFlag.FLAG_COMMIT_OFFSET \
                    or out.commit_offset == off or off < 0:
                continue
            flag = PullSysFlag.build(True, False, out.subscription is not None)
            cmds.append(out._replace(rid=services.new_rid(), max_nums=1, sys_flag=int(flag),
                                commit_offset=off, suspend_ms=0, timeout_ms=SETTLE_TIMEOUT_MS))
        if cmds and not services.settle(cmds, SETTLE_TIMEOUT_MS / 1000.0):
            log.warning("consumer %s: the broker did not confirm the commits of %d queues before "
                        "the final commit", host.group, len(cmds))

    def later(self, req: PullRequest, delay_ms: int) -> None:
        """pullMessage again delay_ms from now (executePullRequestLater)."""
        self.host.scheduler.schedule(delay_ms, lambda: self.pull(req))

    def _cache_budget_spent(self) -> bool:
        host = self.host
        cfg = host.cfg
        if cfg.max_cached_messages < 0 and cfg.max_cached_mib < 0:
            return False
        count = size = 0
        for pq in list(host.table.values()):
            count += pq.msg_count
            size += pq.msg_size
        return (0 <= cfg.max_cached_messages < count) or (0 <= cfg.max_cached_mib < size // MIB)

    def pull(self, req: PullRequest) -> None:
        """pullMessage: the flow-control gates, then the request to the PullMessageService."""
        host = self.host
        pq = req.pq
        if pq.dropped or pq.revoking or req.cancelled:
            return
        pq.last_pull_ms = now_ms()
        if host.state is not ServiceState.RUNNING:
            if host.state is ServiceState.CREATE_JUST:
                self.later(req, host.cfg.pull_time_delay_ms_when_exception)
            return
        if host.paused:
            self.later(req, PULL_TIME_DELAY_MS_WHEN_SUSPEND)
            return
        q_count, q_mib = host.queue_thresholds
        if pq.msg_count > q_count or pq.msg_size // MIB > q_mib or self._cache_budget_spent():
            host.stats.flow_controlled += 1
            self.later(req, PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL)
            return
        if not host.pull_gate(req):
            return
        sub = host.subscriptions.get(req.mq.topic)
        if sub is None and req.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            sub = SubscriptionData.build(req.mq.topic, "*")
        if sub is None:
            self.later(req, host.cfg.pull_time_delay_ms_when_exception)
            return
        self._send(req, sub)

    def _send(self, req: PullRequest, sub: SubscriptionData) -> None:
        host = self.host
        services = host.services
        if services is None:
            return
        mq = req.mq
        found = services.routes.find_broker_address_in_subscribe(
            mq.broker_name, self.pull_api.recalculate_pull_from_which_node(mq), False)
        if found is None:  # pullKernelImpl: fetch the route, then try again
            host.scheduler.submit(lambda: self._refresh_route_then_pull(req))
            return
        sys_flag, commit, sub_string, suspend_ms = host.pull_spec(mq, sub, found.slave)
        rid = services.new_pull(self)
        cmd = cc.PullCommand(
            rid, found.broker_addr, host.group, mq.topic, mq.queue_id, req.next_offset,
            host.cfg.pull_batch, sys_flag, commit, suspend_ms, sub_string, sub.sub_version,
            sub.expression_type, host.cfg.consumer_timeout_ms_when_suspend)  # fmt: skip
        self.pending[rid] = req
        req.broker_addr = found.broker_addr
        req.out = cmd
        services.send_pull(cmd)

    def _refresh_route_then_pull(self, req: PullRequest) -> None:
        host = self.host
        if host.handle is not None and host.state is ServiceState.RUNNING:
            try:
                host.handle.topic_route(req.mq.topic)
            except MQClientError as exc:
                log.info("consumer %s: route of %s: %s", host.group, req.mq.topic, exc)
        self.later(req, host.cfg.pull_time_delay_ms_when_exception)

    def on_pull_result(self, answer: cc.PullAnswer, tail: cc.PullBody) -> None:
        """The PullCallback (I/O thread): the answer of this core's pull answer.rid."""
        host = self.host
        rid, status, next_begin, _lo, _hi, suggest = answer
        req = self.pending.pop(rid, None)
        if req is None:
            return
        if req.out is not None and req.out.rid == rid:
            req.out = None
        if req.cancelled or host.state is not ServiceState.RUNNING:
            return
        pq, mq = req.pq, req.mq
        if pq.dropped or pq.revoking:
            # an answer for a queue being let go changes nothing: its FOUND records are not
            # cached, so a NO_MATCHED after them must not move the offset past them
            # (correctTagsOffset with msg_count 0), nor a late OFFSET_ILLEGAL remove the
            # queue's next ProcessQueue
            return
        if status >= cc.BROKER_ERROR:
            if status == cc.BROKER_ERROR and next_begin in HEARTBEAT_RACE and \
                    time.monotonic() - host.subs_changed_at < HEARTBEAT_RACE_S:
                # the heartbeat carrying the new subscription is on its way (it leaves when
                # the subscription changes, beside the first pulls): try again shortly. The
                # broker may also have lost the registration since (its connection closed):
                # ask for one more (one per broker, rate-limited)
                log.debug("consumer %s: pull of %s before the broker has the subscription",
                          host.group, mq)
                if host.handle is not None and req.broker_addr:
                    host.handle.heartbeat_broker(req.broker_addr)
                self.later(req, HEARTBEAT_RACE_RETRY_MS)
                return
            if status == cc.BROKER_ERROR and next_begin in UNREGISTERED and \
                    self._heartbeat_after_refusal(req, next_begin, tail):
                self.later(req, HEARTBEAT_RACE_RETRY_MS)
                return
            if not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("consumer %s: pull of %s failed: %s%s", host.group, mq,
                            f"code {next_begin} " if status == cc.BROKER_ERROR else "",
                            str(tail, "utf-8", "replace"))  # fmt: skip
            if status == cc.BROKER_ERROR and next_begin == ResponseCode.FLOW_CONTROL:
                self.later(req, PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL)
            else:
                self.later(req, host.cfg.pull_time_delay_ms_when_exception)
            return
        if req.retry_from is not None:  # the batch before this answer was not handled
            req.next_offset, req.retry_from = req.retry_from, None
            self.later(req, host.cfg.pull_time_delay_ms_when_exception)
            return
        req.refused = 0
        self.pull_api.update_pull_from_which_node(mq, suggest)
        pstatus = PullStatus(status)
        if pstatus is PullStatus.FOUND:
            self._found(req, answer, tail)
        elif pstatus in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            req.next_offset = next_begin
            if host.correct_tags_offset() and pq.msg_count == 0 and host.offset_store is not None:
                host.offset_store.update_offset(mq, next_begin, True)  # correctTagsOffset
            self.pull(req)
        else:  # OFFSET_ILLEGAL
            log.warning("consumer %s: pull offset %d of %s is illegal; fixing it to %d",
                        host.group, req.next_offset, mq, next_begin)  # fmt: skip
            host.offset_illegal(req, next_begin)

    def _found(self, req: PullRequest, answer: cc.PullAnswer, tail: cc.PullBody) -> None:
        """A FOUND answer: decode, put, hand over, pull again (the module docstring says
        when the next pull leaves first: then the decode and the put wait until the pulls
        of the I/O thread's whole read are written, `after_pulls_sent`)."""
        host = self.host
        pq = req.pq
        pulled, next_begin = req.next_offset, answer.next_begin
        interval = host.pull_interval_ms()
        services = host.services
        # a run of plain records (uncompressed: bodies as large as stored) to the end: the
        # batch's bounds are its record count and the body's size; the decode walks the same
        # run, so the scan is done once
        scan = scan_pull_body(tail) if services is not None and interval <= 0 \
            and 1 < next_begin - pulled <= host.cfg.pull_batch \
            and host.gates_read_process_queue() else None  # fmt: skip
        n = len(scan[0]) if scan is not None and scan[1] == len(tail) else 0
        if n <= 1:
            self._put(req, answer, tail, pulled, interval, early=False, out=None, scan=scan)
            return
        assert services is not None
        try:
            pq.expect(n, len(tail), pulled, next_begin - 1)
            req.next_offset = next_begin
            self.pull(req)
        except Exception:
            self._not_handled(req, pulled, early=True, out=None)
            return
        out = req.out
        services.after_pulls_sent(
            lambda: self._put(req, answer, tail, pulled, interval, early=True, out=out,
                              scan=scan))  # fmt: skip

    def _put(self, req: PullRequest, answer: cc.PullAnswer, tail: cc.PullBody, pulled: int,
             interval: int, *, early: bool, out: cc.PullCommand | None,
             scan: PullBodyScan | None = None) -> None:  # fmt: skip
        """Decode and put an answer, hand its messages over and pull again, unless its next
        pull was made first (`early`; `out` that pull, None when the gates held it; `scan`
        the body's, when made already)."""
        host = self.host
        pq, mq = req.pq, req.mq
        try:
            sub = host.subscriptions.get(mq.topic)
            msgs = decode_pull_messages(tail, mq, sub, answer.min_offset, answer.max_offset,
                                        scan)  # fmt: skip
            dispatch = pq.put_messages(msgs, answer.max_offset)  # counted even when all filtered
        except Exception:
            self._not_handled(req, pulled, early=early, out=out)
            return
        req.next_offset = answer.next_begin  # after the put: a lite poller's position() sees it
        if msgs:
            host.stats.pulled(mq.topic, len(msgs))
            host.dispatch_pulled(msgs, pq, mq, dispatch)
        if not early:
            if msgs and interval > 0:
                self.later(req, interval)
            elif msgs and host.services is not None:  # Java's order: the handler's wake-up
                host.services.after_wake(lambda: self.pull(req))  # first, then the pull
            else:
                self.pull(req)

    def _not_handled(self, req: PullRequest, pulled: int, *, early: bool,
                     out: cc.PullCommand | None) -> None:
        """A batch that could not be decoded or put: pulled again from `pulled`."""
        host = self.host
        delay = host.cfg.pull_time_delay_ms_when_exception
        log.exception("consumer %s: the answer at %d of %s was not handled; pulling it "
                      "again in %d ms", host.group, pulled, req.mq, delay)  # fmt: skip
        req.pq.unexpect()
        if out is not None and req.out is out:  # the next pull left: its answer pulls
            req.retry_from = pulled  # this batch again instead
        elif early:
            req.next_offset = pulled  # the gates rescheduled that pull: from here, then
        else:
            self.later(req, delay)

    def _heartbeat_after_refusal(self, req: PullRequest, code: int, remark: cc.PullBody) -> bool:
        """A pull refused for want of this client's registration (the broker restarted or
        its connection to us closed, and it forgot the group): heartbeat that broker now
        (rate-limited per broker). True: try the pull again shortly."""
        host = self.host
        handle = host.handle
        if handle is None or not req.broker_addr:
            return False
        req.refused += 1
        if req.refused == 1:
            log.info("consumer %s: pull of %s refused by %s (code %d %s): sending it a heartbeat",
                     host.group, req.mq, req.broker_addr, code,
                     str(remark, "utf-8", "replace").split("\n", 1)[0])  # fmt: skip
        handle.heartbeat_broker(req.broker_addr)
        return req.refused <= UNREGISTERED_FAST_RETRIES
