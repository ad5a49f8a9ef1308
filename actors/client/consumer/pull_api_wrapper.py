"""PullAPIWrapper: client/impl/consumer/PullAPIWrapper.java of RocketMQ 4.9.x.

- which broker of a broker name the next pull of a queue goes to (pullFromWhichNodeTable: the
  broker's suggestWhichBrokerId of the last answer, the master at first);
- the PULL_MESSAGE request a PullRequest becomes (pullKernelImpl; the commit-offset flag
  cleared when the broker is a slave);
- processPullResult: the pull body decoded into the user's MessageExt records, tag-filtered
  again on the client (the broker filters by tag hash only), MIN_OFFSET / MAX_OFFSET set, the
  transaction id of a prepared message set.

`decode_pull_messages` is the consumer's hot path (every pulled message passes it): it reads
the common IPv4 record straight from the pull body into the frozen record, with host strings
cached, and leaves IPv6 hosts and compressed bodies to protocol.message's full decoder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

from actors.client.records import MessageExt
from protocol.bodies import EXPRESSION_TYPE_TAG, MessageQueue, SubscriptionData
from protocol.codes import MASTER_ID, PullSysFlag
from protocol.message import (
    COMPRESSED_FLAG,
    PROPERTY_KEYS,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageDecodeError,
    decode_message_ext,
    parse_properties,
)
from protocol.record import (
    MESSAGE_MAGIC_CODE,
    RECORD_V4_HEAD,
    V4_FIXED_SIZE,
    V6_FLAGS,
    unpack_host,
)

log = logging.getLogger(__name__)

_MIN_RECORD: Final = 91


class PullAPIWrapper:
    """Per consumer group: broker choice per queue and the pull result's processing."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.pull_from_which_node: dict[MessageQueue, int] = {}

    def update_pull_from_which_node(self, mq: MessageQueue, broker_id: int) -> None:
        """Remember the broker the last answer suggested for mq."""
        self.pull_from_which_node[mq] = broker_id

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        """The broker id the next pull of mq goes to."""
        return self.pull_from_which_node.get(mq, MASTER_ID)


def build_sys_flag(commit_offset: bool, suspend: bool, subscription: bool, slave: bool) -> int:
    """PullSysFlag.buildSysFlag (class filter never), commit-offset cleared for a slave."""
    flag = PullSysFlag.build(commit_offset, suspend, subscription)
    if slave:
        flag &= ~PullSysFlag.FLAG_COMMIT_OFFSET
    return int(flag)


# --- the hot path -------------------------------------------------------------------------------
_HOSTS: dict[bytes, str] = {}


def _host(raw: bytes) -> str:
    s = _HOSTS.get(raw)
    if s is None:
        host, port = unpack_host(raw)
        s = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if len(_HOSTS) < 65_536:
            _HOSTS[raw] = s
    return s


_FIELDS: Final = ("topic", "body", "tags", "keys", "properties", "delay_level", "flag", "msg_id",
                  "offset_msg_id", "queue", "queue_offset", "commitlog_offset", "born_timestamp",
                  "store_timestamp", "born_host", "store_host", "reconsume_times", "sys_flag",
                  "body_crc", "store_size", "prepared_transaction_offset", "transaction_id")


def _setters() -> tuple[Callable[[Any, Any], None], ...]:
    """The slot setters of MessageExt in _FIELDS order (a frozen record is built once here)."""
    names = set(MessageExt.__dataclass_fields__)
    if names != set(_FIELDS):
        raise RuntimeError(f"MessageExt fields changed: {sorted(names ^ set(_FIELDS))}")
    return tuple(getattr(MessageExt, n).__set__ for n in _FIELDS)


(_S_TOPIC, _S_BODY, _S_TAGS, _S_KEYS, _S_PROPS, _S_DELAY, _S_FLAG, _S_MSG_ID, _S_OFFSET_ID,
 _S_QUEUE, _S_QOFF, _S_PHY, _S_BORN_TS, _S_STORE_TS, _S_BORN, _S_STORE, _S_RECONSUME, _S_SYSFLAG,
 _S_CRC, _S_SIZE, _S_PREPARED, _S_TX) = _setters()
_new = object.__new__
_unpack_head = RECORD_V4_HEAD.unpack_from


def decode_pull_messages(body: bytes | memoryview, mq: MessageQueue,
                         subscription: SubscriptionData | None, min_offset: int,
                         max_offset: int) -> list[MessageExt]:
    """processPullResult for a FOUND pull: the body's messages as user records.

    A record that does not decode ends the batch (what was decoded before it is kept), as
    MessageDecoder.decodes does; the next pull starts after the last offset the broker sent.
    """
    mv = body if isinstance(body, memoryview) else memoryview(body)
    tags: frozenset[str] | None = None
    if subscription is not None and not subscription.class_filter_mode and \
            subscription.expression_type == EXPRESSION_TYPE_TAG and subscription.tags_set:
        tags = frozenset(subscription.tags_set)
    lo, hi = str(min_offset), str(max_offset)
    out: list[MessageExt] = []
    append = out.append
    n = len(mv)
    pos = 0
    while pos + V4_FIXED_SIZE <= n:
        (total, magic, crc, _qid, flag, qoff, phy, sys_flag, born_ts, born_host, store_ts,
         store_host, reconsume, prepared, blen) = _unpack_head(mv, pos)  # fmt: skip
        end = pos + total
        if magic != MESSAGE_MAGIC_CODE or total < _MIN_RECORD or end > n:
            log.warning("pull body of %s: bad record at %d; the rest is dropped", mq, pos)
            break
        if sys_flag & (V6_FLAGS | COMPRESSED_FLAG):
            try:
                m = _slow(mv, pos, mq, tags, lo, hi)
            except MessageDecodeError as exc:
                log.warning("pull body of %s: record at %d: %s", mq, pos, exc)
                break
            if m is not None:
                append(m)
            pos = end
            continue
        p = pos + V4_FIXED_SIZE
        tpos = p + blen
        if blen < 0 or tpos + 3 > end:
            log.warning("pull body of %s: bad body length at %d", mq, pos)
            break
        tlen = mv[tpos]
        ppos = tpos + 1 + tlen
        plen = int.from_bytes(mv[ppos : ppos + 2], "big", signed=True)
        if ppos + 2 + plen != end:
            log.warning("pull body of %s: bad properties length at %d", mq, pos)
            break
        props = parse_properties(str(mv[ppos + 2 : end], "utf-8", "replace")) if plen else {}
        tag = props.get(PROPERTY_TAGS)
        if tags is not None and tag not in tags:
            pos = end
            continue
        props[PROPERTY_MIN_OFFSET] = lo
        props[PROPERTY_MAX_OFFSET] = hi
        offset_id = (store_host + phy.to_bytes(8, "big", signed=True)).hex().upper()
        o = _new(MessageExt)
        _S_TOPIC(o, str(mv[tpos + 1 : ppos], "utf-8", "replace"))
        _S_BODY(o, bytes(mv[p:tpos]))
        _S_TAGS(o, tag)
        _S_KEYS(o, props.get(PROPERTY_KEYS))
        _S_PROPS(o, props)
        _S_DELAY(o, 0)
        _S_FLAG(o, flag)
        _S_MSG_ID(o, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or offset_id)
        _S_OFFSET_ID(o, offset_id)
        _S_QUEUE(o, mq)
        _S_QOFF(o, qoff)
        _S_PHY(o, phy)
        _S_BORN_TS(o, born_ts)
        _S_STORE_TS(o, store_ts)
        _S_BORN(o, _host(born_host))
        _S_STORE(o, _host(store_host))
        _S_RECONSUME(o, reconsume)
        _S_SYSFLAG(o, sys_flag)
        _S_CRC(o, crc)
        _S_SIZE(o, total)
        _S_PREPARED(o, prepared)
        _S_TX(o, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
              if props.get(PROPERTY_TRANSACTION_PREPARED) == "true" else None)
        append(o)
        pos = end
    return out


def _slow(mv: memoryview, pos: int, mq: MessageQueue, tags: frozenset[str] | None, lo: str,
          hi: str) -> MessageExt | None:
    """An IPv6 or compressed record, through the full decoder."""
    w = decode_message_ext(mv, pos)
    if tags is not None and w.properties.get(PROPERTY_TAGS) not in tags:
        return None
    w.properties[PROPERTY_MIN_OFFSET] = lo
    w.properties[PROPERTY_MAX_OFFSET] = hi
    m = MessageExt.from_wire(w, mq.broker_name)
    return m if m.queue == mq else _with_queue(m, mq)


def _with_queue(m: MessageExt, mq: MessageQueue) -> MessageExt:
    import dataclasses

    return dataclasses.replace(m, queue=mq)


def filter_by_tags(msgs: Sequence[MessageExt], subscription: SubscriptionData) -> list[MessageExt]:
    """The client-side tag check alone (messages decoded elsewhere)."""
    if subscription.class_filter_mode or subscription.expression_type != EXPRESSION_TYPE_TAG or \
            not subscription.tags_set:
        return list(msgs)
    tags = set(subscription.tags_set)
    return [m for m in msgs if m.tags in tags]
