"""Checks of topics, groups and messages before anything is sent.

Mirrors client/Validators.java, common/topic/TopicValidator.java and the checks of
Message.putUserProperty, RocketMQ 4.9.x: the same limits and the same messages, raised as
MessageValidationError (a ValueError) with Java's code. A user property may not take a name of
MessageConst.STRING_HASH_SET (the system's: TAGS, UNIQ_KEY, TRAN_MSG, ...) nor be null or
blank, as in Java; beyond Java, no name or value (tags and keys included, which travel as
properties too) may hold RocketMQ's property separators \x01 and \x02, which Java lets through
to corrupt the stored properties. Only the user's properties are checked: what the client
sets itself (tags, keys, delay level, transactions, request-reply, retries) is added after.

Every producer of the project checks here: Producer, AsyncProducer and TransactionProducer on
every path (through DefaultMQProducerImpl.prepare / prepare_batch and before auto-batching),
the admin CLI's sendMessage and `actormq producer`, and the Spark sink's rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from actors.client.errors import ClientErrorCode, MessageValidationError
from actors.client.records import Message
from protocol.codes import NOT_ALLOWED_SEND_TOPICS, ResponseCode
from protocol.message import STRING_HASH_SET
from protocol.message_properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

CHARACTER_MAX_LENGTH: Final = 255
TOPIC_MAX_LENGTH: Final = 127
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024  # DefaultMQProducer.maxMessageSize
VALID_PATTERN: Final = "^[%|a-zA-Z0-9_-]+$"
_VALID: Final = re.compile(r"[%|a-zA-Z0-9_-]+")


def _illegal(text: str) -> MessageValidationError:
    return MessageValidationError(ClientErrorCode.ILLEGAL_ARGUMENT, text)


def check_group(group: str) -> None:
    """A producer or consumer group name."""
    if not isinstance(group, str) or not group.strip():
        raise _illegal("the specified group is blank")
    if len(group) > CHARACTER_MAX_LENGTH:
        raise _illegal("the specified group is longer than group max length 255.")
    if not _VALID.fullmatch(group):
        raise _illegal(f"the specified group[{group}] contains illegal characters, "
                       f"allowing only {VALID_PATTERN}")


def check_topic(topic: str) -> None:
    """A topic name (not blank, <= 127 chars, [%|a-zA-Z0-9_-])."""
    if not isinstance(topic, str) or not topic.strip():
        raise _illegal("The specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise _illegal(f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not _VALID.fullmatch(topic):
        raise _illegal(f"The specified topic[{topic}] contains illegal characters, "
                       f"allowing only {VALID_PATTERN}")


_SENDABLE: set[str] = set()  # topic names that passed check_send_topic (each send checks)


def check_send_topic(topic: str) -> None:
    """A topic a producer may send to."""
    if type(topic) is str and topic in _SENDABLE:
        return
    check_topic(topic)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise _illegal(f"Sending message to topic[{topic}] is forbidden.")
    if len(_SENDABLE) < 10_000:
        _SENDABLE.add(topic)


def _separated(text: str) -> bool:
    """True when text holds a property separator."""
    return NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text


def _blank(text: str) -> bool:
    """Java's `s.trim().isEmpty()`: nothing but characters <= U+0020."""
    return not text or max(text) <= " "


def _shown(text: object) -> str:
    """A name or value in an error message (long values cut)."""
    shown = repr(text)
    return shown if len(shown) <= 80 else f"{shown[:77]}..."


def _blank_error(name: object, value: object) -> MessageValidationError:
    return _illegal(f"The name or value of property can not be null or blank string! "
                    f"(Property<{_shown(name)}> = {_shown(value)})")


def check_user_property(name: object, value: object) -> None:
    """One user property (Message.putUserProperty's checks, then the separators)."""
    if name in STRING_HASH_SET:
        raise _illegal(f"The Property<{name}> is used by system, input another please")
    if name is None or value is None:
        raise _blank_error(name, value)
    if not isinstance(name, str) or not isinstance(value, str):
        raise _illegal(f"The name and value of property must be str, not "
                       f"{type(name).__name__} {_shown(name)} = {type(value).__name__} "
                       f"{_shown(value)}")
    if _blank(name) or _blank(value):
        raise _blank_error(name, value)
    if _separated(name) or _separated(value):
        raise _illegal(f"The Property<{_shown(name)}> = {_shown(value)} holds \\x01 or \\x02, "
                       f"the separators of RocketMQ's properties string, input another please")


def check_user_properties(props: Mapping[str, str]) -> None:
    """Every user property of a message (see check_user_property)."""
    for name, value in props.items():
        check_user_property(name, value)


def check_property_text(what: str, text: str | None) -> None:
    """Tags or keys, which travel as property values: no \\x01 or \\x02 in them."""
    if text is None:
        return
    if not isinstance(text, str):
        raise _illegal(f"the {what} must be a str, not {type(text).__name__}")
    if _separated(text):
        raise _illegal(f"the {what} {_shown(text)} hold \\x01 or \\x02, the separators of "
                       f"RocketMQ's properties string, input another please")


def check_message(msg: Message, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
    """A message to send: a Message, its topic, a non-empty body within max_message_size,
    its user properties, tags and keys."""
    if not isinstance(msg, Message):
        raise MessageValidationError(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message must be an actors.client.Message, not {type(msg).__name__}")
    check_send_topic(msg.topic)
    if msg.properties:
        check_user_properties(msg.properties)
    if msg.tags is not None:
        check_property_text("tags", msg.tags)
    if msg.keys is not None:
        check_property_text("keys", msg.keys)
    if not msg.body:
        raise MessageValidationError(ResponseCode.MESSAGE_ILLEGAL,
                                     "the message body length is zero")
    if len(msg.body) > max_message_size:
        raise MessageValidationError(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message body size over max value, MAX: {max_message_size}")
    if msg.delay_level < 0:
        raise MessageValidationError(ResponseCode.MESSAGE_ILLEGAL,
                                     f"the delay level {msg.delay_level} is negative")


def check_batch(msgs: Sequence[Message], max_message_size: int = MAX_MESSAGE_SIZE) -> None:
    """A batch: one topic, no delay levels, no retry topic (MessageBatch.generateFromList)."""
    if not msgs:
        raise _illegal("the batch is empty")
    topic = msgs[0].topic
    for m in msgs:
        check_message(m, max_message_size)
        if m.delay_level > 0:
            raise _illegal("TimeDelayLevel is not supported for batching")
        if m.topic != topic:
            raise _illegal("The topic of the messages in one batch should be the same")
    if topic.startswith("%RETRY%"):
        raise _illegal("Retry Group is not supported for batching")
