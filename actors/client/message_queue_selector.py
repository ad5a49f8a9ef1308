"""Queue selectors for ordered and targeted sends.

Mirrors client/producer/MessageQueueSelector.java and producer/selector/
SelectMessageQueueByHash.java, SelectMessageQueueByRandom.java, RocketMQ 4.9.x. The hash
selector uses Java's String.hashCode and Java's remainder, so a Python producer and a Java
producer put one sharding key on the same queue (Python's hash() is salted per process).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from actors.client.records import Message, MessageQueue
from protocol.record import java_string_hash

# (queues, message, arg) -> the queue to send to
MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def java_hash(arg: object) -> int:
    """Java's hashCode for the arguments a selector usually gets (str, int, bool)."""
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < (1 << 31):
            return arg  # Integer.hashCode
        v = arg & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int)(value ^ (value >>> 32))
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    raise TypeError(f"no Java hashCode for {type(arg).__name__}: pass a str or an int")


def hash_index(arg: object, n: int) -> int:
    """abs(arg.hashCode() % n) with Java's remainder (sign of the dividend)."""
    h = java_hash(arg)
    r = abs(h) % n
    return r


def select_by_hash(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """SelectMessageQueueByHash."""
    return mqs[hash_index(arg, len(mqs))]


def select_by_random(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """SelectMessageQueueByRandom."""
    return mqs[random.randrange(len(mqs))]
