"""`actormq admin` message commands: queryMsgByKey, queryMsgById, sendMessage, consumeMessage.

Mirrors tools/command/message/*SubCommand.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from deploy.admin_ext import (
    CLIENT,
    AdminError,
    Usage,
    as_text,
    call,
    echo,
)
from deploy.console.message_service import by_key
from deploy.console.topic_service import ConsoleInputError
from protocol.codes import RequestCode as RC
from protocol.message import (
    decode_messages,
    decode_offset_msg_id,
)


class StoredMessage(Protocol):
    """What the message commands print: a console MessageView or a consumer's MessageExt."""

    @property
    def msg_id(self) -> str: ...
    @property
    def offset_msg_id(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def properties(self) -> Mapping[str, str]: ...
    @property
    def body(self) -> bytes: ...


def _print_messages(msgs: Sequence[StoredMessage]) -> None:
    for m in msgs:
        props = m.properties
        echo(f"msgId={m.msg_id} offsetMsgId={m.offset_msg_id} topic={m.topic} "
             f"queueId={m.queue_id} queueOffset={m.queue_offset} tags={props.get('TAGS', '')} "
             f"keys={props.get('KEYS', '')} storeTimestamp={m.store_timestamp} "
             f"body={as_text(m.body)!r}")  # fmt: skip


def cmd_query_by_key(a: argparse.Namespace) -> int:
    """queryMsgByKey: messages indexed under a key (KEYS or UNIQ_KEY) on every broker."""
    try:
        found = by_key(a.namesrv, a.topic, a.key, a.max)
    except ConsoleInputError as exc:
        raise Usage(str(exc)) from None
    if not found:
        raise AdminError(f"no message with key {a.key!r} in topic {a.topic!r}")
    _print_messages(found)
    return 0


def cmd_query_by_id(a: argparse.Namespace) -> int:
    """queryMsgById: one message by its offset message id (it names the broker)."""
    try:
        host, port, phy = decode_offset_msg_id(a.msg_id)
    except ValueError as exc:
        raise Usage(f"bad message id: {exc}") from None
    resp = call(f"{host}:{port}", RC.VIEW_MESSAGE_BY_ID, {"offset": phy})
    _print_messages(decode_messages(bytes(resp.body)))
    return 0


def parse_properties(items: list[str] | None) -> dict[str, str]:
    """--property NAME=VALUE options as user properties, checked as every send checks them
    (a system name, a blank name or value, \\x01 / \\x02: Usage, exit code 2)."""
    from actors.client import validators

    props: dict[str, str] = {}
    for item in items or ():
        name, eq, value = item.partition("=")
        if not eq:
            raise Usage(f"--property {item!r}: give NAME=VALUE")
        props[name] = value
    try:
        validators.check_user_properties(props)
    except validators.MessageValidationError as exc:
        raise Usage(exc.message) from None
    return props


def cmd_send(a: argparse.Namespace) -> int:
    """sendMessage: one message through the Producer (auto-created topic if the broker allows;
    -b / -q pick the broker name / queue id; --property NAME=VALUE user properties)."""
    from actors.client import Message, MessageQueue, MessageValidationError, MQClientError, Producer
    from actors.client.validators import check_message

    msg = Message(a.topic, a.body.encode(), tags=a.tags, keys=a.keys,
                  properties=parse_properties(a.property))
    try:
        check_message(msg)  # before the client starts: a bad message is a usage error
    except MessageValidationError as exc:
        raise Usage(exc.message) from None
    try:
        with Producer("CLI_SEND_GROUP", namesrv=a.all_namesrv,
                      access_key=CLIENT.access_key, secret_key=CLIENT.secret_key,
                      use_tls=CLIENT.tls or False) as p:  # fmt: skip
            queue = None
            if a.broker is not None or a.queue is not None:
                qs = [q for q in p.publish_queues(a.topic)
                      if a.broker is None or q.broker_name == a.broker]
                if not qs:
                    raise AdminError(f"broker {a.broker!r} has no writable queue for {a.topic!r}")
                qid = a.queue if a.queue is not None else qs[0].queue_id
                queue = MessageQueue(a.topic, qs[0].broker_name, qid)
            r = p.send(msg, queue=queue)
    except MQClientError as exc:
        raise AdminError(exc.message) from None
    echo(f"SendResult [sendStatus={r.status}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, "
         f"brokerName={r.queue.broker_name}, queueId={r.queue.queue_id}, "
         f"queueOffset={r.queue_offset}]")
    return 0


def cmd_consume(a: argparse.Namespace) -> int:
    """consumeMessage: print messages of every queue of the topic through a LitePullConsumer
    (assigned every queue: no rebalance), from the group's offsets (from each queue's start with
    --from-start or without -g); with -g the offsets reached are committed."""
    from actors.client import MQClientError
    from actors.client.consumer import LitePullConsumer

    group = a.group or "CLI_CONSUME_GROUP"
    printed = 0
    try:
        with LitePullConsumer(group, namesrv=a.namesrv, consume_from="first",
                              auto_commit=False, pull_batch=32,
                              access_key=CLIENT.access_key, secret_key=CLIENT.secret_key,
                              use_tls=CLIENT.tls or False) as c:  # fmt: skip
            queues = c.fetch_message_queues(a.topic)
            start = c.beginning_offsets(queues) if a.from_start or not a.group else None
            c.assign(queues, a.subscription, offsets=start)
            idle = 0
            unprinted: dict[Any, int] = {}  # queue -> first offset polled but not printed
            while printed < a.count and idle < 2:  # two quiet polls: every queue is read
                msgs = c.poll(0.5)
                idle = 0 if msgs else idle + 1
                for m in msgs[a.count - printed :]:
                    unprinted[m.queue] = min(unprinted.get(m.queue, m.queue_offset),
                                             m.queue_offset)  # fmt: skip
                msgs = msgs[: a.count - printed]
                _print_messages(msgs)
                printed += len(msgs)
            if a.group:
                c.commit({q: unprinted.get(q, c.position(q)) for q in queues})
    except MQClientError as exc:
        raise AdminError(exc.message) from None
    echo(f"consumed {printed} message(s)")
    return 0
