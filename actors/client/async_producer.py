"""AsyncProducer: the asyncio twin of Producer; nothing it does blocks the event loop.

Mirrors DefaultMQProducer's send paths, RocketMQ 4.9.x, for asyncio code (research §1.2:
aiokafka's shape): `async with`, `await send(...)` returning the SendResult, `await
enqueue(...)` returning an asyncio.Future once there is room in the in-flight budget,
`await flush()`. Sends are written from the loop's thread without waiting (the request goes
into the connection's out buffer; the client's I/O thread reads the answer and resolves the
future through call_soon_threadsafe). What may block (starting the client, a route seen for
the first time, a sync request-reply) runs in the loop's default executor.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Sequence
from typing import Any, Self

from actors.client.errors import InflightLimitError
from actors.client.message_queue_selector import MessageQueueSelector, select_by_hash
from actors.client.producer import Producer
from actors.client.records import Message, MessageExt, MessageQueue, SendResult


class AsyncProducer:
    """`async with AsyncProducer("pg", namesrv=...) as p: r = await p.send(Message(...))`."""

    def __init__(self, group: str = "DEFAULT_PRODUCER", **kw: Any) -> None:
        max_inflight = int(kw.get("max_inflight", 10_000))
        kw["max_inflight"] = max_inflight
        kw["on_full"] = "raise"  # the twin waits on its own semaphore instead of blocking
        self._producer = Producer(group, **kw)
        self._room = asyncio.Semaphore(max_inflight)
        self.group = group

    @property
    def producer(self) -> Producer:
        """The sync producer underneath (thread-safe: usable from other threads too)."""
        return self._producer

    async def _run(self, fn: Any, *args: Any, **kw: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args, **kw))

    async def start(self) -> Self:
        """Start the client (in the executor: the first client of a process starts the actor
        system)."""
        await self._run(self._producer.start)
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float = 10.0) -> None:
        """Flush, unregister, release (in the executor)."""
        await self._run(self._producer.close, timeout)

    async def flush(self, timeout: float | None = None) -> int:
        """Wait until no send is in flight; how many still are after timeout."""
        return int(await self._run(self._producer.flush, timeout))

    async def _ensure_route(self, topic: str) -> None:
        """Start the client and learn the topic's route first, off the loop, when needed."""
        impl = self._producer._impl
        if impl is None:
            await self.start()
            impl = self._producer._impl
            assert impl is not None
        if topic not in impl.handle.publish_infos:
            await self._run(impl.publish_queues, topic)

    async def enqueue(self, msg: Message, *, queue: MessageQueue | None = None,
                      timeout: float | None = None) -> asyncio.Future[SendResult]:
        """Wait for room in the in-flight budget, send, and return the answer's future."""
        return await self._enqueue(msg, False, queue, timeout)

    async def _enqueue(self, msg: Message | list[Message], batch: bool,
                       queue: MessageQueue | None, timeout: float | None
                       ) -> asyncio.Future[SendResult]:  # fmt: skip
        topic = msg[0].topic if isinstance(msg, list) else msg.topic
        await self._ensure_route(topic)
        loop = asyncio.get_running_loop()
        while True:
            await self._room.acquire()
            try:
                cfut = self._producer._send_async_nonblocking(msg, batch, queue, timeout)
                break
            except InflightLimitError:  # budget shared with sync callers of .producer
                self._room.release()
            except BaseException:
                self._room.release()
                raise
            await asyncio.sleep(0.001)  # retry soon (a loop: awaiting itself nested frames)
        # the answer completes cfut on the client's I/O thread; an asyncio.Semaphore is not
        # thread-safe (released there, a waiter could miss its wake-up and enqueue hang)
        cfut.add_done_callback(lambda _f: loop.call_soon_threadsafe(self._room.release))
        return asyncio.wrap_future(cfut)

    async def send(self, msg: Message, *, queue: MessageQueue | None = None,
                   selector: MessageQueueSelector | None = None, arg: Any = None,
                   timeout: float | None = None) -> SendResult:
        """Send and await the broker's answer."""
        if selector is not None:
            impl = await self._run(self._producer._impl_for_async)
            queue = await self._run(impl.select_queue, msg, selector, arg)
        return await (await self._enqueue(msg, False, queue, timeout))

    async def send_orderly(self, msg: Message, sharding_key: str, *,
                           timeout: float | None = None) -> SendResult:  # fmt: skip
        """Send to the queue Java's SelectMessageQueueByHash picks for sharding_key."""
        return await self.send(msg, selector=select_by_hash, arg=sharding_key, timeout=timeout)

    async def send_batch(self, msgs: Iterable[Message], *, queue: MessageQueue | None = None,
                         timeout: float | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE, awaited."""
        return await (await self._enqueue(list(msgs), True, queue, timeout))

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without any answer (one attempt)."""
        await self._ensure_route(msg.topic)
        self._producer.send_oneway(msg, queue=queue)

    async def request(self, msg: Message, timeout: float = 3.0) -> MessageExt:
        """Request-reply, awaited (the wait runs in the executor)."""
        return await self._run(self._producer.request, msg, timeout)  # type: ignore[no-any-return]

    async def publish_queues(self, topic: str) -> Sequence[MessageQueue]:
        """The topic's writable queues."""
        return await self._run(self._producer.publish_queues, topic)  # type: ignore[no-any-return]
