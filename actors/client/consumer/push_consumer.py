"""PushConsumer and AsyncPushConsumer: client/consumer/DefaultMQPushConsumer.java of RocketMQ
4.9.x as a Python API.

    def handle(msgs):                       # a tuple of MessageExt (consume_batch of them)
        return ConsumeResult.SUCCESS         # or RECONSUME_LATER; raising counts as later
    with PushConsumer("cg", namesrv="127.0.0.1:9876", handler=handle) as c:   # starts on enter
        c.subscribe("Orders", "*")           # or "TagA || TagB", or an SQL92 expression
        ...                                  # exit: stop pulling, drain, commit, unregister

The handler runs on the consumer's worker threads in this process (`workers`, 20 by default);
with `orderly=True` one queue at a time, in queue order. `handler(msgs, context)` may set
`context.ack_index` / `context.delay_level` (concurrently) or `context.suspend_millis`
(orderly). AsyncPushConsumer takes an `async def` handler and runs it on the caller's event
loop (at most `workers` at once); start and close never block the loop.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Self

from actors.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
)
from actors.client.consumer.consume_message_service import ConsumeContext, ConsumeResult
from actors.client.consumer.consumer_config import RebalanceListener, ServiceState
from actors.client.consumer.default_mq_push_consumer_impl import (
    DefaultMQPushConsumerImpl,
    PushConsumerConfig,
)
from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.records import MessageExt
from protocol.bodies import ConsumeFromWhere, MessageModel, MessageQueue

log = logging.getLogger(__name__)

Handler = Callable[..., Any]
AsyncHandler = Callable[..., Coroutine[Any, Any, Any]]
FROM: dict[str, ConsumeFromWhere] = {
    "last": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    "first": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    "timestamp": ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
}
MODELS: dict[str, MessageModel] = {
    "clustering": MessageModel.CLUSTERING,
    "broadcasting": MessageModel.BROADCASTING,
}


def consume_from_where(value: str | ConsumeFromWhere) -> ConsumeFromWhere:
    """"last" / "first" / "timestamp" (or Java's enum)."""
    if isinstance(value, ConsumeFromWhere):
        return value
    try:
        return FROM[value.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"consume_from must be one of {sorted(FROM)}, not {value!r}") from None


def message_model(value: str | MessageModel) -> MessageModel:
    """"clustering" / "broadcasting" (or Java's enum)."""
    if isinstance(value, MessageModel):
        return value
    try:
        return MODELS[value.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"model must be one of {sorted(MODELS)}, not {value!r}") from None


def timestamp_ms(value: datetime.datetime | int | float | None) -> int | None:
    """A start time as epoch ms (a naive datetime is local time, as Java's parse)."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)


class PushConsumer:
    """A push consumer: the broker's messages delivered to `handler` as they arrive."""

    def __init__(self, group: str, *, namesrv: str | Sequence[str],
                 handler: Handler | None = None, orderly: bool = False,
                 model: str | MessageModel = "clustering",
                 consume_from: str | ConsumeFromWhere = "last",
                 consume_timestamp: datetime.datetime | int | None = None,
                 allocate: AllocateMessageQueueStrategy | None = None,
                 workers: int = 20, consume_batch: int = 1, pull_batch: int = 32,
                 listener: RebalanceListener | None = None, instance_name: str | None = None,
                 drain_timeout: float = 10.0, **settings: Any) -> None:
        """settings: any other PushConsumerConfig field (pull_threshold_for_queue, ...)."""
        self._cfg = PushConsumerConfig(
            group=group, namesrv=namesrv if isinstance(namesrv, str) else list(namesrv),
            instance_name=instance_name, model=message_model(model),
            consume_from_where=consume_from_where(consume_from),
            consume_timestamp_ms=timestamp_ms(consume_timestamp),
            strategy=allocate or AllocateMessageQueueAveragely(), orderly=orderly,
            workers=workers, consume_batch=consume_batch, pull_batch=pull_batch, **settings)
        self._cfg.check()
        self._handler = handler
        self._listener = listener
        self._subs: dict[str, tuple[str, str | None]] = {}
        self.drain_timeout = drain_timeout
        self._impl: DefaultMQPushConsumerImpl | None = None

    # -- configuration ----------------------------------------------------------------------------
    def handler(self, fn: Handler) -> Handler:
        """Decorator: set the handler (before start)."""
        if self._impl is not None:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT, "set the handler before start")
        self._handler = fn
        return fn

    def subscribe(self, topic: str, expression: str = "*", *,
                  expression_type: str | None = None) -> None:
        """Consume topic: "*", "TagA || TagB", or an SQL92 expression (expression_type="SQL92"
        forces it; a condition such as "a > 5" is taken as SQL92 by itself)."""
        self._subs[topic] = (expression, expression_type)
        if self._impl is not None:
            self._impl.subscribe(topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming topic."""
        self._subs.pop(topic, None)
        if self._impl is not None:
            self._impl.unsubscribe(topic)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> Self:
        """Connect, register the group, start pulling what the rebalance assigns."""
        if self._impl is not None:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT, "the consumer was started once")
        if self._handler is None:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                "a handler is required (handler=..., or @consumer.handler)")
        impl = DefaultMQPushConsumerImpl(self._cfg, self._handler, self._listener)
        for topic, (expr, etype) in self._subs.items():
            impl.subscribe(topic, expr, etype)
        self._impl = impl
        impl.start()
        return self

    def close(self, timeout: float | None = None) -> bool:
        """Stop pulling, wait (up to timeout, default drain_timeout) for running handlers,
        commit every offset, unregister. True when every handler finished in time."""
        impl = self._impl
        if impl is None:
            return True
        return impl.shutdown(self.drain_timeout if timeout is None else timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pause(self) -> None:
        """Stop pulling (what is cached is still consumed)."""
        if self._impl is not None:
            self._impl.paused = True

    def resume(self) -> None:
        """Pull again."""
        if self._impl is not None:
            self._impl.paused = False

    # -- introspection ----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True between start and close."""
        return self._impl is not None and self._impl.state is ServiceState.RUNNING

    @property
    def client_id(self) -> str:
        """This client's id as the brokers see it (ip@instance)."""
        return self._impl.client_id if self._impl is not None else ""

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer holds now."""
        return set(self._impl.table) if self._impl is not None else set()

    def stats(self) -> dict[str, Any]:
        """Counters: pulled, consumed OK / failed, cached messages and bytes per queue."""
        impl = self._impl
        if impl is None:
            return {}
        t = impl.stats.totals()
        queues = {f"{mq.topic}/{mq.broker_name}/{mq.queue_id}": {
            "cached_msgs": pq.msg_count, "cached_bytes": pq.msg_size,
            "in_flight": len(pq.in_flight), "first_offset": pq.first_offset(),
            "committed": impl.offset_store.read_memory(mq) if impl.offset_store else -1}
            for mq, pq in sorted(impl.table.items())}
        return {"pulled": t.pulled, "consumed_ok": t.ok, "consumed_failed": t.failed,
                "flow_controlled": impl.stats.flow_controlled,
                "cached_msgs": sum(q["cached_msgs"] for q in queues.values()),
                "cached_bytes": sum(q["cached_bytes"] for q in queues.values()),
                "queues": queues}


class AsyncPushConsumer:
    """PushConsumer for asyncio: an `async def` handler runs on the loop that started it."""

    def __init__(self, group: str, *, namesrv: str | Sequence[str],
                 handler: AsyncHandler | None = None, **kw: Any) -> None:
        self._handler = handler
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sync = PushConsumer(group, namesrv=namesrv, handler=self._call, **kw)

    def handler(self, fn: AsyncHandler) -> AsyncHandler:
        """Decorator: set the async handler (before start)."""
        self._handler = fn
        return fn

    def _call(self, msgs: tuple[MessageExt, ...], ctx: ConsumeContext) -> Any:
        """Runs on a worker thread: the coroutine runs on the loop, the worker waits."""
        loop, fn = self._loop, self._handler
        if loop is None or fn is None or loop.is_closed():
            return ConsumeResult.RECONSUME_LATER
        from actors.client.consumer.consume_message_service import handler_arity

        coro = fn(msgs, ctx) if handler_arity(fn) == 2 else fn(msgs)
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def subscribe(self, topic: str, expression: str = "*", *,
                  expression_type: str | None = None) -> None:
        """As PushConsumer.subscribe (answered at once; the heartbeat goes out meanwhile)."""
        self._sync.subscribe(topic, expression, expression_type=expression_type)

    def unsubscribe(self, topic: str) -> None:
        """As PushConsumer.unsubscribe."""
        self._sync.unsubscribe(topic)

    async def start(self) -> Self:
        """Start (the blocking part runs on a thread)."""
        if self._handler is None:
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT, "an async handler is required")
        self._loop = asyncio.get_running_loop()
        await self._loop.run_in_executor(None, self._sync.start)
        return self

    async def close(self, timeout: float | None = None) -> bool:
        """Stop, drain, commit, unregister (the loop keeps running the draining handlers)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self._sync.close, timeout)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def pause(self) -> None:
        """Stop pulling."""
        self._sync.pause()

    def resume(self) -> None:
        """Pull again."""
        self._sync.resume()

    @property
    def client_id(self) -> str:
        """This client's id."""
        return self._sync.client_id

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer holds now."""
        return self._sync.assignment()

    def stats(self) -> dict[str, Any]:
        """As PushConsumer.stats."""
        return self._sync.stats()
