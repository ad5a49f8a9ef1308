"""A pull refused for want of this client's registration (code 24 "the consumer's group info
not exist", 25 "subscription not latest": the broker restarted, or its connection to us
closed, and it forgot the group) sends a heartbeat to that broker at once and pulls again
shortly; a burst of refusals, one per queue, asks for one heartbeat (issue #20 item 3).
A Java 4.9.x consumer waits for its 30 s heartbeat timer, pulling every 3 s meanwhile."""

from __future__ import annotations

from typing import Any

from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.consumer_channel import PullAnswer
from actors.client.consumer.consumer_config import ConsumerConfig, ServiceState
from actors.client.consumer.consumer_core import ConsumerImplBase
from actors.client.consumer.offset_store import OffsetStore
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.consumer.pull_callback import (
    HEARTBEAT_RACE_RETRY_MS,
    UNREGISTERED_FAST_RETRIES,
    PullCallback,
)
from actors.client.consumer.pull_request import PullRequest
from actors.client.mq_client_instance import REFUSAL_HEARTBEAT_MIN_S, RefusalHeartbeats
from actors.client.records import PullStatus
from protocol.bodies import MessageQueue
from protocol.codes import ResponseCode

ADDR = "127.0.0.1:10911"
REMARK = memoryview(b"the consumer's group info not exist\nSee http://rocketmq.apache.org/...")


class _Handle:
    """The InstanceHandle's heartbeat_broker, rate-limited as the real one is."""

    def __init__(self) -> None:
        self.limit = RefusalHeartbeats()
        self.now = 0.0
        self.sent: list[str] = []

    def heartbeat_broker(self, addr: str) -> None:
        if self.limit.due(addr, self.now):
            self.sent.append(addr)


class _Pulling(PullCallback):
    """The core's pulling with nothing behind it; what it schedules is recorded."""

    def __init__(self, host: Any) -> None:
        super().__init__(host)
        self.delays: list[int] = []

    def pull(self, req: PullRequest) -> None:
        pass

    def later(self, req: PullRequest, delay_ms: int) -> None:
        self.delays.append(delay_ms)


class _Core(ConsumerImplBase):
    """The core with nothing behind it; what it schedules is recorded."""

    def __init__(self, cfg: ConsumerConfig) -> None:
        super().__init__(cfg)
        self.pulling = self.recorder = _Pulling(self)

    def persist(self, mqs: list[MessageQueue], sync: bool) -> None:
        pass


def _core() -> tuple[_Core, _Handle]:
    core = _Core(ConsumerConfig("refused_cg", "127.0.0.1:9876"))
    handle = _Handle()
    core.handle = handle  # type: ignore[assignment]
    core.offset_store = OffsetStore("refused_cg")
    core.state = ServiceState.RUNNING
    core.subs_changed_at = -1e9  # long after the start: not the start's heartbeat race
    return core, handle


def _refused(core: _Core, rid: int, req: PullRequest, code: int) -> None:
    core.pulling.pending[rid] = req
    core.pulling.on_pull_result(PullAnswer(rid, cc.BROKER_ERROR, int(code), 0, 0, 0), REMARK)


def test_a_burst_of_refusals_sends_one_heartbeat_and_pulls_again_shortly() -> None:
    core, handle = _core()
    reqs = []
    for qid in range(4):
        mq = MessageQueue("T", "broker-a", qid)
        pq: ProcessQueue[Any] = ProcessQueue(0)
        core.table[mq] = pq
        req = PullRequest(mq, pq, 5, False)
        req.broker_addr = ADDR
        reqs.append(req)
    for rid, req in enumerate(reqs, 1):
        _refused(core, rid, req, ResponseCode.SUBSCRIPTION_NOT_EXIST)
    assert handle.sent == [ADDR]  # one heartbeat for the burst
    assert core.recorder.delays == [HEARTBEAT_RACE_RETRY_MS] * 4
    handle.now += REFUSAL_HEARTBEAT_MIN_S
    _refused(core, 9, reqs[0], ResponseCode.SUBSCRIPTION_NOT_LATEST)  # still refused later
    assert handle.sent == [ADDR, ADDR]


def test_fast_retries_are_bounded_and_start_again_after_an_answer() -> None:
    core, _handle = _core()
    mq = MessageQueue("T", "broker-a", 0)
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[mq] = pq
    req = PullRequest(mq, pq, 5, False)
    req.broker_addr = ADDR
    for rid in range(1, UNREGISTERED_FAST_RETRIES + 3):
        _refused(core, rid, req, ResponseCode.SUBSCRIPTION_NOT_EXIST)
    slow = core.cfg.pull_time_delay_ms_when_exception
    fast = [HEARTBEAT_RACE_RETRY_MS] * UNREGISTERED_FAST_RETRIES
    assert core.recorder.delays == fast + [slow] * 2
    core.pulling.pending[50] = req
    core.pulling.on_pull_result(PullAnswer(50, PullStatus.NO_NEW_MSG.value, 5, 0, 5, 0),
                                memoryview(b""))
    core.recorder.delays.clear()
    _refused(core, 51, req, ResponseCode.SUBSCRIPTION_NOT_EXIST)  # a later loss of the group
    assert core.recorder.delays == [HEARTBEAT_RACE_RETRY_MS]


def test_other_refusals_keep_the_usual_delay_and_send_no_heartbeat() -> None:
    core, handle = _core()
    mq = MessageQueue("T", "broker-a", 0)
    pq: ProcessQueue[Any] = ProcessQueue(0)
    core.table[mq] = pq
    req = PullRequest(mq, pq, 5, False)
    req.broker_addr = ADDR
    _refused(core, 1, req, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)  # a heartbeat cannot fix
    _refused(core, 2, req, ResponseCode.SYSTEM_ERROR)
    assert handle.sent == []
    assert core.recorder.delays == [core.cfg.pull_time_delay_ms_when_exception] * 2


def test_refusal_heartbeats_are_rate_limited_per_broker() -> None:
    limit = RefusalHeartbeats(1.0)
    assert limit.due("a:1", 10.0)
    assert not limit.due("a:1", 10.9)
    assert limit.due("b:1", 10.9)  # another broker
    assert limit.due("a:1", 11.0)
