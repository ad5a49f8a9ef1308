"""The console's topics: the list, one topic's route and queues, create / update / delete and a
test send.

Mirrors apache/rocketmq-dashboard's TopicServiceImpl. The list costs one request per master
(GET_ALL_TOPIC_CONFIG) beside the name server's topic list, whatever the number of topics; the
per-queue offsets are on the topic's own page. A test message is sent as our producers send it
(actors/client's SEND_MESSAGE_V2 command and response reader), signed like every other request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from actors.client.default_mq_producer_impl import plain_properties
from actors.client.errors import MQBrokerError
from actors.client.mq_client_api import (
    SendRequest,
    process_send_response,
    send_message_command,
)
from actors.client.records import Message
from actors.client.topic_publish_info import TopicPublishInfo
from actors.client.validators import MessageValidationError, check_message, check_topic
from deploy.admin_ext import (
    AdminError,
    call,
    cluster_info,
    cluster_masters,
    invoke,
    json_object,
    offset_table,
    route_masters,
    topic_names,
    topic_route,
    topic_route_or_none,
)
from protocol.codes import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_system_topic,
)
from protocol.codes import RequestCode as RC
from protocol.message_client_id_setter import create_uniq_id

CONSOLE_PRODUCER_GROUP = "CONSOLE_PRODUCER_GROUP"


class ConsoleInputError(ValueError):
    """A value typed into a form that no request should carry."""


@dataclass(frozen=True)
class TopicRow:
    name: str
    kind: str  # NORMAL, RETRY, DLQ or SYSTEM (the dashboard's filter buttons)
    brokers: int
    read_queues: int
    write_queues: int
    perm: int
    order: bool


def topic_kind(name: str) -> str:
    if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "RETRY"
    if name.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "DLQ"
    return "SYSTEM" if is_system_topic(name) else "NORMAL"


def topic_rows(namesrv: str) -> list[TopicRow]:
    """Every topic of the name server with what its masters hold of it."""
    names = set(topic_names(namesrv))
    held: dict[str, list[dict[str, object]]] = {}
    for _broker, addr in cluster_masters(cluster_info(namesrv), None):
        try:
            table = json_object(call(addr, RC.GET_ALL_TOPIC_CONFIG)).get("topicConfigTable", {})
        except (AdminError, ValueError):
            continue  # a master that is down: its topics show with what the others hold
        for name, conf in (table.items() if isinstance(table, dict) else ()):
            if isinstance(conf, dict):
                held.setdefault(str(name), []).append(conf)
    rows = []
    for name in sorted(names | held.keys()):
        confs = held.get(name, [])
        rows.append(TopicRow(
            name, topic_kind(name), len(confs),
            sum(int(c.get("readQueueNums", 0)) for c in confs),  # type: ignore[call-overload]
            sum(int(c.get("writeQueueNums", 0)) for c in confs),  # type: ignore[call-overload]
            int(confs[0].get("perm", 0)) if confs else 0,  # type: ignore[call-overload]
            any(c.get("order") is True for c in confs)))
    return rows


@dataclass(frozen=True)
class QueueRow:
    broker: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update: int  # ms since the epoch (0: never written)


@dataclass(frozen=True)
class TopicDetail:
    name: str
    brokers: list[tuple[str, str, int, int, int]]  # name, master address, read, write, perm
    queues: list[QueueRow]
    groups: list[str]

    @property
    def messages(self) -> int:
        return sum(q.max_offset for q in self.queues)


def queue_rows(topic: str, masters: dict[str, str]) -> list[QueueRow]:
    """examineTopicStats: each queue's min / max offset and last store time on the masters
    (broker name -> address) of the topic's route, by broker and queue."""
    queues: list[QueueRow] = []
    for broker, addr in sorted(masters.items()):
        stats = call(addr, RC.GET_TOPIC_STATS_INFO, {"topic": topic}, ok=(0, 17))
        for mq, o in offset_table(stats) if stats.code == 0 else []:
            if not (isinstance(mq, dict) and isinstance(o, dict)):
                continue
            queues.append(QueueRow(broker, int(mq.get("queueId", 0)), int(o.get("minOffset", 0)),
                                   int(o.get("maxOffset", 0)),
                                   int(o.get("lastUpdateTimestamp", 0))))  # fmt: skip
    queues.sort(key=lambda q: (q.broker, q.queue_id))
    return queues


def consumed_by(topic: str, masters: dict[str, str]) -> list[str]:
    """queryTopicConsumeByWho on each master: the groups subscribed to or holding offsets of
    the topic."""
    groups: set[str] = set()
    for addr in masters.values():
        who = call(addr, RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}, ok=(0, 1, 17))
        if who.code == 0:
            groups.update(str(g) for g in json_object(who).get("groupList", []))
    return sorted(groups)


def topic_detail(namesrv: str, topic: str) -> TopicDetail:
    """A topic's route, each queue's offsets and the groups that consume it."""
    route = topic_route(namesrv, topic)
    masters = route_masters(route)
    brokers = [(q.broker_name, masters.get(q.broker_name, ""), q.read_queue_nums,
                q.write_queue_nums, q.perm)
               for q in sorted(route.queue_datas, key=lambda q: q.broker_name)]  # fmt: skip
    return TopicDetail(topic, brokers, queue_rows(topic, masters), consumed_by(topic, masters))


def _queue_count(text: str, what: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ConsoleInputError(f"{what} must be a whole number, not {text!r}") from None
    if not 1 <= n <= 1024:
        raise ConsoleInputError(f"{what} must be between 1 and 1024, not {n}")
    return n


def checked(check: Callable[[str], None], name: str) -> str:
    """`name` when `check` (a client validator) passes it, else ConsoleInputError."""
    try:
        check(name)
    except MessageValidationError as exc:
        raise ConsoleInputError(exc.message) from None
    return name


def checked_topic(name: str) -> str:
    return checked(check_topic, name)


def create_or_update_topic(namesrv: str, cluster: str | None, topic: str, read_queues: str,
                           write_queues: str, perm: str, order: bool | None) -> list[str]:
    """updateTopic: a topic that exists is written on the masters that hold it (unless a
    cluster is named), each keeping its own topicSysFlag and (order None) its order flag; a
    new one on every master of `cluster` (every cluster when None). The brokers written."""
    checked_topic(topic)
    if is_system_topic(topic):
        raise ConsoleInputError(f"{topic} is a system topic: it is not changed from here")
    if perm not in ("2", "4", "6"):
        raise ConsoleInputError(f"perm must be 2 (write), 4 (read) or 6 (both), not {perm!r}")
    base = {"topic": topic, "defaultTopic": "TBW102",
            "readQueueNums": _queue_count(read_queues, "read queues"),
            "writeQueueNums": _queue_count(write_queues, "write queues"), "perm": perm,
            "topicFilterType": "SINGLE_TAG"}  # fmt: skip
    route = None if cluster else topic_route_or_none(namesrv, topic)
    if route is not None and route_masters(route):
        masters = sorted(route_masters(route).items())
    else:
        masters = cluster_masters(cluster_info(namesrv), cluster or None)
    if not masters:
        raise ConsoleInputError(f"cluster {cluster!r} has no master broker")
    for _name, addr in masters:
        held = json_object(call(addr, RC.GET_ALL_TOPIC_CONFIG)).get("topicConfigTable", {})
        conf = held.get(topic) if isinstance(held, dict) else None
        conf = conf if isinstance(conf, dict) else {}
        keep_order = conf.get("order") is True if order is None else order
        call(addr, RC.UPDATE_AND_CREATE_TOPIC, {
            **base, "topicSysFlag": int(conf.get("topicSysFlag", 0) or 0),
            "order": "true" if keep_order else "false"})  # fmt: skip
    return [name for name, _addr in masters]


def delete_topic(namesrv: str, topic: str) -> list[str]:
    """deleteTopic: from every master holding it and from the name server."""
    checked_topic(topic)
    masters = sorted(route_masters(topic_route(namesrv, topic)).items())
    for _name, addr in masters:
        call(addr, RC.DELETE_TOPIC_IN_BROKER, {"topic": topic})
    call(namesrv, RC.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
    return [name for name, _addr in masters]


@dataclass(frozen=True)
class TestSendResult:
    status: str
    msg_id: str
    offset_msg_id: str
    broker: str
    queue_id: int
    queue_offset: int


def send_test_message(namesrv: str, topic: str, body: str, tags: str = "",
                      keys: str = "") -> TestSendResult:  # fmt: skip
    """One message, checked, routed and sent as our Producer sends one (actors/client's
    validator, TopicPublishInfo's round robin, the V2 request and its answer's reader)."""
    msg = Message(topic, body.encode(), tags=tags or None, keys=keys or None)
    try:
        check_message(msg)
    except MessageValidationError as exc:
        raise ConsoleInputError(exc.message) from None
    route = topic_route(namesrv, topic)
    info = TopicPublishInfo.from_route(topic, route)
    if not info.ok():
        raise ConsoleInputError(f"topic {topic} has no writable queue")
    mq = info.select_one_message_queue()
    addr = route_masters(route)[mq.broker_name]
    msg_id = create_uniq_id()
    req = SendRequest(topic, msg.body, plain_properties(msg_id, msg), 0, msg_id)
    resp = invoke(addr, send_message_command(CONSOLE_PRODUCER_GROUP, req, mq), ok=(0, 10, 11, 12))
    try:
        r = process_send_response(mq.broker_name, topic, msg_id, resp, addr, mq)
    except MQBrokerError as exc:
        raise AdminError(f"{addr} answered code {exc.code}: {exc.remark}") from None
    return TestSendResult(str(r.status), r.msg_id, r.offset_msg_id, r.queue.broker_name,
                          r.queue.queue_id, r.queue_offset)  # fmt: skip
