"""LitePullConsumer and AsyncLitePullConsumer: client/consumer/DefaultLitePullConsumer.java of
RocketMQ 4.9.x as a Python API.

    with LitePullConsumer("cg", namesrv="127.0.0.1:9876") as c:   # starts on enter
        c.subscribe("Orders", "*")           # or c.assign([...queues...]) (not both)
        for msg in c:                        # or c.poll(timeout=1.0) -> list
            handle(msg)                      # offsets auto-committed every 5 s (or c.commit())

    async with AsyncLitePullConsumer("cg", namesrv="127.0.0.1:9876") as c:
        c.subscribe("Orders")
        async for msg in c: ...              # never blocks the loop

Offsets: poll() moves a queue's consume offset past what it returned; auto-commit (every
`auto_commit_interval` s, checked at each poll) commits the offsets of earlier polls, so what
a crash loses is re-delivered (at least once, as Kafka's auto commit). seek() / seek_to_begin()
/ seek_to_end() / offset_for_timestamp(), pause() / resume() per queue, committed().
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, Self

from actors.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
)
from actors.client.consumer.consumer_config import RebalanceListener, ServiceState
from actors.client.consumer.default_lite_pull_consumer_impl import (
    DefaultLitePullConsumerImpl,
    LitePullConsumerConfig,
)
from actors.client.consumer.mq_admin_impl import MQAdminImpl
from actors.client.consumer.push_consumer import consume_from_where, message_model, timestamp_ms
from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.records import MessageExt
from protocol.bodies import MessageQueue

log = logging.getLogger(__name__)


class LitePullConsumer:
    """Pull at your own pace: poll() / iteration over what background pulls cached."""

    def __init__(self, group: str, *, namesrv: str | Sequence[str],
                 model: str = "clustering", consume_from: str = "last",
                 consume_timestamp: datetime.datetime | int | None = None,
                 allocate: AllocateMessageQueueStrategy | None = None,
                 auto_commit: bool = True, auto_commit_interval: float = 5.0,
                 pull_batch: int = 10, poll_timeout: float = 5.0,
                 listener: RebalanceListener | None = None, instance_name: str | None = None,
                 **settings: Any) -> None:
        """settings: any other LitePullConsumerConfig field (pull_threshold_for_all, ...)."""
        cfg = LitePullConsumerConfig(
            group=group, namesrv=namesrv if isinstance(namesrv, str) else list(namesrv),
            instance_name=instance_name, model=message_model(model),
            consume_from_where=consume_from_where(consume_from),
            consume_timestamp_ms=timestamp_ms(consume_timestamp),
            strategy=allocate or AllocateMessageQueueAveragely(), pull_batch=pull_batch,
            auto_commit=auto_commit, auto_commit_interval_ms=int(auto_commit_interval * 1000),
            **settings)
        self.poll_timeout = poll_timeout
        self._impl = DefaultLitePullConsumerImpl(cfg, listener)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> Self:
        """Connect; queues come with subscribe() or assign()."""
        self._impl.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Persist what was committed, release the queues, unregister. Like Java's shutdown it
        commits nothing more: the last poll()'s messages may not have been processed (a loop
        over them that raised) and are polled again by the queue's next reader; call commit()
        first to keep them from coming back."""
        self._impl.shutdown(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        """True between start and close."""
        return self._impl.state is ServiceState.RUNNING

    @property
    def client_id(self) -> str:
        """This client's id."""
        return self._impl.client_id

    # -- what to consume --------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str = "*", *,
                  expression_type: str | None = None) -> None:
        """Consume topic with the group's rebalance (not with assign())."""
        self._impl.subscribe(topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming topic."""
        self._impl.unsubscribe(topic)

    def assign(self, queues: Iterable[MessageQueue], expression: str = "*", *,
               offsets: dict[MessageQueue, int] | None = None) -> None:
        """Consume exactly these queues (no rebalance; not with subscribe()); expression
        filters them (tags or SQL92) as subscribe's does; offsets: where each starts (else the
        group's offset, else consume_from)."""
        self._impl.assign(queues, expression, offsets)

    def beginning_offsets(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """Each queue's first stored offset."""
        admin = self._need_admin()
        return {q: admin.min_offset(q) for q in queues}

    def end_offsets(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """Each queue's next offset (where a new message goes)."""
        admin = self._need_admin()
        return {q: admin.max_offset(q) for q in queues}

    def assignment(self) -> set[MessageQueue]:
        """The queues held now."""
        return set(self._impl.table)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's queues (to assign)."""
        return self._need_admin().fetch_subscribe_message_queues(topic)

    # -- consuming --------------------------------------------------------------------------------
    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """The messages of one pull, or [] after timeout (default poll_timeout) seconds."""
        return self._impl.poll(self.poll_timeout if timeout is None else timeout)

    def __iter__(self) -> Iterator[MessageExt]:
        """Every message, one at a time, until the consumer is closed."""
        while self._impl.state is ServiceState.RUNNING:
            yield from self._impl.poll(self.poll_timeout)

    # -- offsets ----------------------------------------------------------------------------------
    def commit(self, offsets: dict[MessageQueue, int] | None = None, *,
               persist: bool = True) -> None:
        """Commit what poll returned so far (or the given next offsets); persist: at once and
        answered by the broker."""
        if offsets is None:
            self._impl.commit_all(persist)
        else:
            self._impl.commit(offsets, persist)

    def position(self, mq: MessageQueue) -> int:
        """The offset the next poll of mq starts at (what commit() would store)."""
        return self._impl.position(mq)

    def committed(self, mq: MessageQueue) -> int:
        """The offset stored for mq (-1: none)."""
        return self._impl.committed(mq)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """The next poll of mq starts at offset."""
        self._impl.seek(mq, offset)

    def seek_to_begin(self, mq: MessageQueue) -> None:
        """The next poll of mq starts at its first stored message."""
        self._impl.seek(mq, self._need_admin().min_offset(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        """The next poll of mq returns only what arrives from now on."""
        self._impl.seek(mq, self._need_admin().max_offset(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp: datetime.datetime | int) -> int:
        """The first offset of mq stored at or after timestamp (ms or datetime)."""
        ts = timestamp_ms(timestamp)
        assert ts is not None
        return self._need_admin().search_offset(mq, ts)

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling these queues."""
        self._impl.pause(queues)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Pull these queues again."""
        self._impl.resume(queues)

    def _need_admin(self) -> MQAdminImpl:
        if self._impl.admin is None:
            raise MQClientError(ClientErrorCode.CLIENT_CLOSED, "the consumer is not started")
        return self._impl.admin


class AsyncLitePullConsumer:
    """LitePullConsumer for asyncio: `await poll()`, `async for`, `async with`."""

    def __init__(self, group: str, *, namesrv: str | Sequence[str], **kw: Any) -> None:
        self._sync = LitePullConsumer(group, namesrv=namesrv, **kw)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    def _on_data(self) -> None:
        """Called on the I/O thread when a pull result is cached."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def start(self) -> Self:
        """Start (the blocking part on a thread)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._sync._impl.on_data = self._on_data
        await self._loop.run_in_executor(None, self._sync.start)
        return self

    async def close(self, timeout: float = 10.0) -> None:
        """close() on a thread: persist what was committed, release, unregister."""
        await asyncio.get_running_loop().run_in_executor(None, self._sync.close, timeout)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def subscribe(self, topic: str, expression: str = "*", *,
                  expression_type: str | None = None) -> None:
        """As LitePullConsumer.subscribe (registration is a short blocking call)."""
        self._sync.subscribe(topic, expression, expression_type=expression_type)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """As LitePullConsumer.assign."""
        self._sync.assign(queues)

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """The messages of one pull, or [] after timeout; the loop runs meanwhile."""
        wake = self._wake
        assert wake is not None, "start() first"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._sync.poll_timeout if timeout is None else timeout)
        while True:
            wake.clear()
            msgs = self._sync._impl.poll(0)  # never waits: what is cached now
            if msgs:
                return msgs
            left = deadline - loop.time()
            if left <= 0 or not self._sync.running:
                return []
            try:
                await asyncio.wait_for(wake.wait(), left)
            except TimeoutError:
                return []

    async def __aiter__(self) -> AsyncIterator[MessageExt]:
        """Every message until the consumer is closed."""
        while self._sync.running:
            for m in await self.poll():
                yield m

    def commit(self, offsets: dict[MessageQueue, int] | None = None, *,
               persist: bool = False) -> None:
        """As LitePullConsumer.commit (persist=False by default: no wait for the broker)."""
        self._sync.commit(offsets, persist=persist)

    async def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit and wait for the broker's answer (on a thread)."""
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: self._sync.commit(offsets, persist=True))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """As LitePullConsumer.seek."""
        self._sync.seek(mq, offset)

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling these queues."""
        self._sync.pause(queues)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Pull these queues again."""
        self._sync.resume(queues)

    def assignment(self) -> set[MessageQueue]:
        """The queues held now."""
        return self._sync.assignment()
