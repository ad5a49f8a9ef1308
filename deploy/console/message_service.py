"""The console's messages: by topic and time range, by key, by message id; a body preview;
resend to a consumer group; a group's dead-letter queue.

Mirrors apache/rocketmq-dashboard's MessageServiceImpl and DlqMessageServiceImpl. A time range
is read as the dashboard reads it: each queue's offsets at the range's ends
(SEARCH_OFFSET_BY_TIMESTAMP), then non-committing pulls under mqadmin's TOOLS_CONSUMER group, at
most MAX_MESSAGES in all. A message id is tried as an offset message id (VIEW_MESSAGE_BY_ID),
then as a client's UNIQ_KEY through the index. Resend is CONSUME_MESSAGE_DIRECTLY: the broker
hands the stored message to one client of the group, which runs its listener on it and answers.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from actors.client import client_requests as rq
from actors.client.records import PullStatus
from deploy.admin_ext import (
    AdminError,
    ask,
    call,
    cluster_info,
    json_object,
    route_masters,
    topic_route,
)
from deploy.console.consumer_service import checked_group, connection_list
from deploy.console.topic_service import ConsoleInputError, checked_topic
from protocol.codes import DLQ_GROUP_TOPIC_PREFIX, TOOLS_CONSUMER_GROUP, PullSysFlag
from protocol.codes import RequestCode as RC
from protocol.headers import PullMessageRequestHeader
from protocol.message import MessageExt, decode_messages, decode_offset_msg_id

MAX_MESSAGES = 2000  # the dashboard's cap on a time-range query
PULL_BATCH = 32
PREVIEW_BYTES = 64 * 1024


@dataclass(frozen=True)
class MessageView:
    """A stored message as the pages show it."""

    msg_id: str
    offset_msg_id: str
    topic: str
    broker: str
    queue_id: int
    queue_offset: int
    tags: str
    keys: str
    store_timestamp: int
    born_timestamp: int
    born_host: str
    store_host: str
    reconsume_times: int
    properties: dict[str, str]
    body: bytes

    @classmethod
    def of(cls, m: MessageExt, broker: str = "") -> MessageView:
        props = dict(m.properties)
        return cls(m.msg_id, m.offset_msg_id, m.topic, broker, m.queue_id, m.queue_offset,
                   props.get("TAGS", ""), props.get("KEYS", ""), m.store_timestamp,
                   m.born_timestamp, m.born_address, m.store_address, m.reconsume_times, props,
                   bytes(m.body))  # fmt: skip


@dataclass(frozen=True)
class BodyPreview:
    kind: str  # "text", "json" or "hex"
    text: str
    truncated: bool


def body_preview(body: bytes, kind: str = "") -> BodyPreview:
    """The body shown as JSON (pretty), text (UTF-8) or a hex dump: `kind` when it fits the
    body, else the first that does, in that order. Escaping is the template's job."""
    cut = body[:PREVIEW_BYTES]
    truncated = len(body) > PREVIEW_BYTES
    text = _text(cut)
    if text is not None and kind in ("", "json") and not truncated:
        try:
            return BodyPreview("json", json.dumps(json.loads(text), indent=2,
                                                  ensure_ascii=False), False)  # fmt: skip
        except (ValueError, RecursionError):  # not JSON, or nested past what we unfold
            pass
    if text is not None and kind in ("", "json", "text"):
        return BodyPreview("text", text, truncated)
    lines = []
    for at in range(0, len(cut), 16):
        chunk = cut[at:at + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {hexes:<47}  {shown}")
    return BodyPreview("hex", "\n".join(lines), truncated)


_CONTROL = frozenset(chr(c) for c in range(32)) - frozenset("\t\n\r")


def _text(body: bytes) -> str | None:
    """The body as text when it is UTF-8 without control characters (tabs and line breaks
    aside); None for what is better shown in hex."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if _CONTROL.intersection(text) else text


def short_preview(body: bytes) -> str:
    """A list cell's glimpse of a body: its text, or its bytes in hex."""
    text = _text(body)
    return body.hex(" ") if text is None else text


def _search(addr: str, topic: str, queue_id: int, ts: int) -> int:
    return ask(addr, rq.search_offset(topic, queue_id, ts))


def pull_range(addr: str, topic: str, queue_id: int, begin: int, end: int,
               limit: int) -> list[MessageExt]:  # fmt: skip
    """Up to `limit` messages of one queue from offset `begin` (inclusive) to `end`
    (exclusive), pulled without committing anything."""
    out: list[MessageExt] = []
    offset = begin
    while offset < end and len(out) < limit:
        head = PullMessageRequestHeader(
            TOOLS_CONSUMER_GROUP, topic, queue_id, offset, min(PULL_BATCH, end - offset),
            PullSysFlag.FLAG_SUBSCRIPTION, 0, 0, 0, "*", "TAG")  # no commit, no suspend
        got = ask(addr, rq.pull_message(head))
        if got.status is PullStatus.FOUND:
            found = [m for m in decode_messages(got.body) if m.queue_offset < end]
            out += found[: limit - len(out)]
        if got.next_begin_offset <= offset:
            break
        offset = got.next_begin_offset
    return out


def by_time(namesrv: str, topic: str, begin_ms: int, end_ms: int) -> tuple[list[MessageView],
                                                                            bool]:
    """Messages stored in [begin_ms, end_ms], newest first, and whether the cap cut the
    answer short."""
    checked_topic(topic)
    if end_ms < begin_ms:
        raise ConsoleInputError("the range ends before it begins")
    route = topic_route(namesrv, topic)
    masters = route_masters(route)
    found: list[MessageView] = []
    capped = False
    for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = masters.get(q.broker_name)
        if addr is None:
            continue
        for qid in range(q.read_queue_nums):
            # getOffsetInQueueByTime stops at any message of that very millisecond: search a
            # millisecond wider on each side, the store-time filter keeps the range exact
            begin = _search(addr, topic, qid, begin_ms - 1)
            end = _search(addr, topic, qid, end_ms + 1) + 1
            left = MAX_MESSAGES - len(found)
            if left <= 0:
                capped = True
                break
            for m in pull_range(addr, topic, qid, begin, end, left):
                if begin_ms <= m.store_timestamp <= end_ms:
                    found.append(MessageView.of(m, q.broker_name))
            capped = capped or len(found) >= MAX_MESSAGES
    found.sort(key=lambda v: v.store_timestamp, reverse=True)
    return found, capped


def by_key(namesrv: str, topic: str, key: str, max_num: int = 64) -> list[MessageView]:
    """Messages indexed under `key` (their KEYS or UNIQ_KEY) on every master of the topic."""
    checked_topic(topic)
    if not key.strip():
        raise ConsoleInputError("the key is empty")
    found = []
    for broker, addr in sorted(route_masters(topic_route(namesrv, topic)).items()):
        resp = call(addr, RC.QUERY_MESSAGE, {
            "topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": 0,
            "endTimestamp": int(time.time() * 1000) + 60_000}, ok=(0, 22))  # fmt: skip
        if resp.code == 0 and resp.body:
            found += [MessageView.of(m, broker) for m in decode_messages(bytes(resp.body))
                      if key in m.properties.get("KEYS", "").split(" ")
                      or m.properties.get("UNIQ_KEY") == key]  # fmt: skip
    return sorted(found, key=lambda v: v.store_timestamp, reverse=True)


def broker_addresses(namesrv: str) -> set[str]:
    """Every broker address the name server knows (masters and slaves)."""
    info = cluster_info(namesrv)
    return {a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()}


def stored_at(namesrv: str, msg_id: str) -> tuple[str, int] | None:
    """(broker address, commit-log offset) an offset message id names, when it names a broker
    of this cluster; None for anything else (a client's UNIQ_KEY has the same length, and an
    id must never send the console to an address it does not already serve)."""
    try:
        host, port, phy = decode_offset_msg_id(msg_id)
    except ValueError:
        return None
    addr = f"{host}:{port}"
    if not 0 < port < 65536 or addr not in broker_addresses(namesrv):
        return None
    return addr, phy


def by_id(namesrv: str, topic: str, msg_id: str) -> MessageView:
    """One message by its offset message id, or by the client's message id (UNIQ_KEY), as
    the admin's viewMessage tries both."""
    msg_id = msg_id.strip()
    if not msg_id:
        raise ConsoleInputError("the message id is empty")
    where = stored_at(namesrv, msg_id)
    if where is not None:
        addr, phy = where
        resp = call(addr, RC.VIEW_MESSAGE_BY_ID, {"offset": phy}, ok=(0, 1))
        if resp.code == 0 and resp.body:
            msgs = decode_messages(bytes(resp.body))
            if msgs and (not topic or msgs[0].topic == topic):
                return MessageView.of(msgs[0])
    if not topic:
        raise ConsoleInputError("give the topic to find a message by its client message id")
    for view in by_key(namesrv, topic, msg_id):
        if view.msg_id == msg_id:
            return view
    raise AdminError(f"no message {msg_id} in topic {topic}")


@dataclass(frozen=True)
class ResendResult:
    client_id: str
    result: str  # CMResult: CR_SUCCESS, CR_LATER, CR_ROLLBACK, CR_COMMIT, CR_THROW_EXCEPTION...
    remark: str
    spent_ms: int


def resend_to_group(namesrv: str, topic: str, msg_id: str, group: str,
                    client_id: str = "") -> ResendResult:  # fmt: skip
    """consumeMessageDirectly: one client of `group` (the given one, else the first online)
    consumes the stored message with its listener and says how it went."""
    checked_group(group)
    view = by_id(namesrv, topic, msg_id)
    where = stored_at(namesrv, view.offset_msg_id)
    if where is None:
        raise AdminError(f"message {msg_id} is not stored on a broker of this cluster")
    addr = where[0]
    masters = sorted(route_masters(topic_route(namesrv, view.topic)).items())
    broker = next((name for name, a in masters if a == addr), view.broker)
    if not client_id:  # a client of the group connected to the broker that stores it
        conns = connection_list([(broker, addr)], group).get("connectionSet", []) or []
        ids = sorted(str(c.get("clientId", "")) for c in conns)
        if not ids:
            raise AdminError(f"group {group} has no client online on {broker} to consume "
                             "the message")  # fmt: skip
        client_id = ids[0]
    resp = call(addr, RC.CONSUME_MESSAGE_DIRECTLY, {
        "consumerGroup": group, "clientId": client_id, "msgId": view.offset_msg_id,
        "brokerName": broker}, ok=(0, 1, 206))  # fmt: skip
    if resp.code != 0:
        raise AdminError(f"{addr} answered code {resp.code}: {resp.remark or ''}")
    body = json_object(resp)
    return ResendResult(client_id, str(body.get("consumeResult", "")),
                        str(body.get("remark") or ""), int(body.get("spentTimeMills", 0) or 0))


def dlq_topic_of(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + checked_group(group)

