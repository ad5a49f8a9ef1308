"""What the SparkBridge asks a RocketMQ cluster: routes, queue heads, offsets by time, commits.

Mirrors client/impl/MQAdminImpl.java (minOffset, maxOffset, searchOffset per MessageQueue,
each asked of the queue's master) and client/impl/factory/MQClientInstance.java
(updateTopicRouteInfoFromNameServer: GET_ROUTEINFO_BY_TOPIC from the first name server that
answers; readable queues of masters only, as topicRouteData2TopicSubscribeInfo keeps them),
plus RemoteBrokerOffsetStore.updateConsumeOffsetToBroker for an optional group's offsets.

Written sans-IO as generators: each step yields the requests it needs (Call: an address and
a RemotingCommand) and is sent back one result per request, a response or a CallFailed. The
SparkBridgeCore runs them; tests can drive them with canned answers.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Final

from actors.spark_bridge.planner import QueueHead, QueueKey
from protocol.bodies import TopicRouteData
from protocol.codes import PermName, PullSysFlag, RequestCode, ResponseCode, SparkBridgeCode
from protocol.command import RemotingCommand
from protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from protocol.message import decode_messages

log = logging.getLogger(__name__)

SCAN_PULL_NUMS: Final = 32  # messages per pull when refining a time search
SCAN_MAX_PULLS: Final = 64  # per queue; past this the search's answer stands (logged)


@dataclass(slots=True)
class Call:
    """One request to a name server or broker."""

    addr: str
    cmd: RemotingCommand


@dataclass(slots=True)
class CallFailed:
    """A request got no answer: connection refused or lost, or timed out."""

    addr: str
    reason: str


Result = RemotingCommand | CallFailed
Step = Generator[list[Call], list[Result], object]


class BridgeError(Exception):
    """A planning request fails with a response code and a remark for the driver."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(frozen=True, slots=True)
class BrokerRoute:
    """A broker of a topic's route: its master and readable / writable queue counts."""

    topic: str
    broker: str
    master: str | None
    read_queues: int


def routes(name_servers: tuple[str, ...], topics: tuple[str, ...]
           ) -> Generator[list[Call], list[Result], dict[str, list[BrokerRoute]]]:  # fmt: skip
    """Each topic's brokers, from the first name server that answers."""
    failures: list[str] = []
    for ns in name_servers:
        calls = [Call(ns, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                  GetRouteInfoRequestHeader(t).to_ext()))
                 for t in topics]  # fmt: skip
        results = yield calls
        failed = next((r for r in results if isinstance(r, CallFailed)), None)
        if failed is not None:
            failures.append(f"{ns}: {failed.reason}")
            continue
        out: dict[str, list[BrokerRoute]] = {}
        for topic, resp in zip(topics, results, strict=True):
            assert isinstance(resp, RemotingCommand)
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                raise BridgeError(ResponseCode.TOPIC_NOT_EXIST,
                                  f"topic {topic!r} does not exist (name server {ns})")
            if resp.code != ResponseCode.SUCCESS:
                raise BridgeError(SparkBridgeCode.SPARK_UNREACHABLE,
                                  f"name server {ns} answered code {resp.code} for the route "
                                  f"of {topic!r}: {resp.remark or ''}")  # fmt: skip
            out[topic] = _broker_routes(topic, TopicRouteData.from_json(bytes(resp.body)))
        return out
    raise BridgeError(SparkBridgeCode.SPARK_UNREACHABLE,
                      f"no name server answered ({'; '.join(failures)})")


def _broker_routes(topic: str, route: TopicRouteData) -> list[BrokerRoute]:
    masters = {bd.broker_name: bd.master_addr for bd in route.broker_datas}
    return [BrokerRoute(topic, qd.broker_name, masters.get(qd.broker_name),
                        qd.read_queue_nums if PermName.is_readable(qd.perm) else 0)
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)]  # fmt: skip


def heads(brokers: Mapping[str, list[BrokerRoute]], *, tolerate_down: bool,
          with_max: bool = True) -> Generator[list[Call], list[Result], dict[QueueKey, QueueHead]]:
    """Min (and max) offset of every readable queue, asked of each master in one pipelined
    round. A broker without a master or not answering fails the step, or with tolerate_down
    (a running stream) is left out and logged."""
    calls: list[Call] = []
    keys: list[tuple[QueueKey, str]] = []
    down: list[str] = []
    for routes_of in brokers.values():
        for br in routes_of:
            if br.master is None:
                down.append(f"{br.broker} (no master in the route of {br.topic})")
                continue
            for qid in range(br.read_queues):
                key = QueueKey(br.topic, br.broker, qid)
                keys.append((key, br.master))
                calls.append(Call(br.master, RemotingCommand.request(
                    RequestCode.GET_MIN_OFFSET,
                    GetMinOffsetRequestHeader(br.topic, qid).to_ext())))  # fmt: skip
                if with_max:
                    calls.append(Call(br.master, RemotingCommand.request(
                        RequestCode.GET_MAX_OFFSET,
                        GetMaxOffsetRequestHeader(br.topic, qid).to_ext())))  # fmt: skip
    results = yield calls
    per = 2 if with_max else 1
    out: dict[QueueKey, QueueHead] = {}
    bad: dict[str, str] = {}
    for i, (key, addr) in enumerate(keys):
        got = results[i * per: i * per + per]
        try:
            lo = _offset_of(got[0])
            hi = _offset_of(got[1]) if with_max else lo
        except _NoOffset as exc:
            bad.setdefault(key.broker, f"{addr}: {exc}")
            continue
        out[key] = QueueHead(key, addr, max(lo, 0), max(hi, 0))
    for broker, why in bad.items():
        down.append(f"{broker} ({why})")
        for key in [k for k in out if k.broker == broker]:
            del out[key]  # a broker is in or out as a whole
    if down:
        if not tolerate_down:
            raise BridgeError(SparkBridgeCode.SPARK_UNREACHABLE,
                              "cannot read queue offsets of broker(s) " + "; ".join(down))
        log.warning("skipping broker(s) this round: %s", "; ".join(down))
    return out


class _NoOffset(Exception):
    pass


def _offset_of(r: Result) -> int:
    if isinstance(r, CallFailed):
        raise _NoOffset(r.reason)
    if r.code != ResponseCode.SUCCESS:
        raise _NoOffset(f"code {r.code} {r.remark or ''}".strip())
    try:
        return int((r.ext_fields or {})["offset"])
    except (KeyError, ValueError):
        raise _NoOffset("reply without an offset") from None


def offsets_by_time(heads_: Mapping[QueueKey, QueueHead], ts_ms: int, group: str
                    ) -> Generator[list[Call], list[Result], dict[QueueKey, int]]:  # fmt: skip
    """Per queue, the first offset whose storeTimestamp >= ts_ms (max when none).

    SEARCH_OFFSET_BY_TIMESTAMP answers the offset whose store time is closest to the time
    asked (ConsumeQueue.getOffsetInQueueByTime), which may lie on either side and, among
    messages stored in the same millisecond, is any of them. Asking for ts_ms - 1 lands at or
    before the first message at ts_ms; pulls then walk forward to it."""
    live = {k: h for k, h in heads_.items() if h.max_offset > h.min_offset}
    out = {k: h.max_offset for k, h in heads_.items() if k not in live}
    keys = sorted(live)
    results = yield [Call(live[k].addr, RemotingCommand.request(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        SearchOffsetRequestHeader(k.topic, k.queue_id, max(ts_ms - 1, 0)).to_ext()))
        for k in keys]  # fmt: skip
    pos: dict[QueueKey, int] = {}
    for key, r in zip(keys, results, strict=True):
        try:
            pos[key] = min(max(_offset_of(r), live[key].min_offset), live[key].max_offset)
        except _NoOffset as exc:
            raise BridgeError(SparkBridgeCode.SPARK_UNREACHABLE,
                              f"searching {key} by time at {live[key].addr}: {exc}") from None
    for _ in range(SCAN_MAX_PULLS):
        todo = sorted(k for k, p in pos.items() if p < live[k].max_offset)
        if not todo:
            break
        results = yield [Call(live[k].addr, _pull(k, pos[k], group)) for k in todo]
        for key, r in zip(todo, results, strict=True):
            found = _scan(key, pos[key], r, ts_ms)
            if found is not None:
                out[key] = found
                del pos[key]
            elif isinstance(r, RemotingCommand):
                nxt = int((r.ext_fields or {}).get("nextBeginOffset", pos[key]))
                pos[key] = nxt if nxt > pos[key] else live[key].max_offset
    for key, p in pos.items():
        if p < live[key].max_offset:
            log.warning("time search of %s stopped scanning at offset %d", key, p)
        out[key] = p
    return out


def _pull(key: QueueKey, offset: int, group: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, PullMessageRequestHeader(
        consumer_group=group, topic=key.topic, queue_id=key.queue_id, queue_offset=offset,
        max_msg_nums=SCAN_PULL_NUMS, sys_flag=PullSysFlag.FLAG_SUBSCRIPTION, commit_offset=0,
        suspend_timeout_millis=0, sub_version=0, subscription="*", expression_type="TAG",
    ).to_ext())  # fmt: skip


def _scan(key: QueueKey, offset: int, r: Result, ts_ms: int) -> int | None:
    """The first offset at or after `offset` stored at ts_ms or later, from one pull."""
    if isinstance(r, CallFailed):
        raise BridgeError(SparkBridgeCode.SPARK_UNREACHABLE,
                          f"pulling {key} at {offset} for a time search: {r.reason}")
    if r.code != ResponseCode.SUCCESS:
        return None
    for m in decode_messages(bytes(r.body)):
        if m.queue_offset >= offset and m.store_timestamp >= ts_ms:
            return int(m.queue_offset)
    return None


def commit_offsets(group: str, offsets: Mapping[QueueKey, int], addrs: Mapping[QueueKey, str],
                   why: str) -> Generator[list[Call], list[Result], dict[QueueKey, str]]:
    """UPDATE_CONSUMER_OFFSET of each queue on its master; the queues not recorded, and why.

    A 4.9.8 broker records a topic@group's first offset by looking up the group's queue map,
    creating one when absent and putting it (ConsumerOffsetManager.commitOffset), on a pool of
    32 threads: two first commits of one topic and group handled at once each build a map and
    the later put drops the other's queue. So the commits of one (master, topic) go out as one
    queue alone, then the rest together once it is answered (the map exists by then). Each
    call is logged with the offsets it sent (the caller warns of the ones not recorded)."""
    keys = sorted(offsets)
    failed = {k: "no master known this round" for k in keys if k not in addrs}
    firsts: dict[tuple[str, str], QueueKey] = {}
    for k in keys:
        if k in addrs:
            firsts.setdefault((addrs[k], k.topic), k)
    rest = [k for k in keys if k in addrs and firsts[(addrs[k], k.topic)] != k]
    for wave in (sorted(firsts.values()), rest):
        if not wave:
            continue
        results = yield [Call(addrs[k], RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            UpdateConsumerOffsetRequestHeader(group, k.topic, k.queue_id, offsets[k]).to_ext()))
            for k in wave]  # fmt: skip
        for key, r in zip(wave, results, strict=True):
            if isinstance(r, CallFailed):
                failed[key] = r.reason
            elif r.code != ResponseCode.SUCCESS:
                failed[key] = f"code {r.code} {r.remark or ''}".strip()
    log.info("group %s (%s): offsets sent %s", group, why,
             " ".join(f"{k}={offsets[k]}" for k in keys if k in addrs) or "none")
    return failed
