"""PullRequest: client/impl/consumer/PullRequest.java of RocketMQ 4.9.x (one queue's pull
position: the queue, its ProcessQueue, the next offset to pull), and its pull that is out."""

from __future__ import annotations

from actors.client.consumer.consumer_channel import PullCommand
from actors.client.consumer.process_queue import ProcessQueue
from actors.client.records import MessageExt
from protocol.bodies import MessageQueue


class PullRequest:
    """PullRequest.java: one queue's pull position."""

    __slots__ = ("broker_addr", "cancelled", "mq", "next_offset", "out", "pq",
                 "previously_locked", "refused", "retry_from")

    def __init__(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], next_offset: int,
                 previously_locked: bool) -> None:
        self.mq = mq
        self.pq = pq
        self.next_offset = next_offset
        self.previously_locked = previously_locked
        self.cancelled = False  # a seek replaced it: its answer and its next pull are dropped
        self.broker_addr = ""  # where its last pull went
        self.refused = 0  # pulls refused in a row for want of this client's registration
        self.out: PullCommand | None = None  # its pull on its way or held at the broker
        self.retry_from: int | None = None  # a batch not handled: pull it again from here
