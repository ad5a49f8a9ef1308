"""Checks of topics, groups and messages before anything is sent.

Mirrors client/Validators.java and common/topic/TopicValidator.java, RocketMQ 4.9.x: the same
limits and the same messages, raised as MessageValidationError (a ValueError) with Java's code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from actors.client.errors import ClientErrorCode, MessageValidationError
from actors.client.records import Message
from protocol.codes import NOT_ALLOWED_SEND_TOPICS, ResponseCode

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


def check_message(msg: Message, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
    """A message to send: a Message, its topic, a non-empty body within max_message_size."""
    if not isinstance(msg, Message):
        raise MessageValidationError(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message must be an actors.client.Message, not {type(msg).__name__}")
    check_send_topic(msg.topic)
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
