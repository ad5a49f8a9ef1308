"""Producer: the public, thread-safe producer (sync, async with futures, oneway, batch, ordered).

Mirrors client/producer/DefaultMQProducer.java, RocketMQ 4.9.x (defaults: sendMsgTimeout 3 s,
retryTimesWhenSendFailed 2, compressMsgBodyOverHowmuch 4096, maxMessageSize 4 MiB,
retryAnotherBrokerWhenNotStoreOK false) plus what a Python user expects (docs/CLIENT.md):
a context manager whose exit flushes, `concurrent.futures.Future`s, callbacks called exactly
once on one callback thread, a bounded in-flight budget that blocks or raises, and request().
Deliberate differences: latency fault tolerance is on by default (Java: off), so a broker that
failed is skipped (10 min, Java's table) instead of costing every other send a failed attempt;
send_async batches what accumulates while its topic's requests are in flight (auto_batch,
RocketMQ 5's ProduceAccumulator; produce_accumulator.py), so a busy producer pays one request
per batch.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Self

from actors.client import validators
from actors.client.client_config import (
    SERIALIZE_TYPES,
    ClientConfig,
    parse_namesrv,
    tls_setting,
)
from actors.client.default_mq_producer_impl import DefaultMQProducerImpl, SendRequest, now_ms
from actors.client.errors import (
    ClientClosedError,
    ClientErrorCode,
    InflightLimitError,
    MQClientError,
)
from actors.client.message_queue_selector import MessageQueueSelector, select_by_hash
from actors.client.mq_client_api import MQClientAPI
from actors.client.mq_client_manager import PRODUCER, InstanceHandle, MQClientManager
from actors.client.produce_accumulator import ProduceAccumulator
from actors.client.records import Message, MessageExt, MessageQueue, SendResult
from actors.client.request_response_future import HOLDER, create_correlation_id
from actors.client.trace_dispatcher import (
    MAX_MSG_SIZE,
    SEND_TIMEOUT_S,
    AsyncTraceDispatcher,
    inner_group,
)
from actors.runtime.tls import TlsConfig
from protocol import message as wire
from protocol.acl import SessionCredentials
from protocol.codes import DEFAULT_PRODUCER_GROUP
from protocol.command import RemotingCommand

log = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | None, BaseException | None], None]


class Producer:
    """Sends messages to a RocketMQ 4.x cluster (actormq or Apache RocketMQ).

    `with Producer("pg", namesrv="127.0.0.1:9876") as p: p.send(Message("T", b"x"))`
    """

    _role = PRODUCER

    def __init__(self, group: str = DEFAULT_PRODUCER_GROUP, *, namesrv: str | Sequence[str],
                 send_timeout: float = 3.0, retries: int = 2,
                 retry_another_broker_when_not_store_ok: bool = False,
                 compress_over: int = wire.COMPRESS_BODY_OVER, compress_level: int = 5,
                 max_message_size: int = validators.MAX_MESSAGE_SIZE,
                 latency_fault_tolerance: bool = True, max_inflight: int = 10_000,
                 on_full: Literal["block", "raise"] = "block",
                 instance_name: str | None = None, unit_name: str | None = None,
                 serialize_type: Literal["json", "rocketmq", "msgpack"] = "json",
                 auto_batch: bool = True, access_key: str | None = None,
                 secret_key: str | None = None, security_token: str | None = None,
                 use_tls: bool | TlsConfig = False, enable_trace: bool = False,
                 trace_topic: str | None = None) -> None:
        validators.check_group(group)
        if on_full not in ("block", "raise"):
            raise ValueError(f"on_full must be 'block' or 'raise', not {on_full!r}")
        if max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        if serialize_type not in SERIALIZE_TYPES:
            raise ValueError(f"serialize_type must be one of {sorted(SERIALIZE_TYPES)}")
        if send_timeout <= 0 or retries < 0:
            raise ValueError("send_timeout must be > 0 and retries >= 0")
        self.group = group
        self._config = ClientConfig(parse_namesrv(namesrv), instance_name or "DEFAULT",
                                    unit_name=unit_name,
                                    serialize_type=SERIALIZE_TYPES[serialize_type],
                                    credentials=SessionCredentials.of(access_key, secret_key,
                                                                      security_token),
                                    tls=tls_setting(use_tls))
        self._explicit_instance = instance_name is not None
        self._options = dict(
            send_timeout_ms=int(send_timeout * 1000), retries=retries,
            retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok,
            compress_over=compress_over, compress_level=compress_level,
            max_message_size=max_message_size, latency_fault_tolerance=latency_fault_tolerance)
        self.max_inflight = max_inflight
        self.on_full = on_full
        self.auto_batch = auto_batch
        self._accumulator: ProduceAccumulator | None = None
        self._inflight = 0
        self._idle = threading.Condition()
        self._start_lock = threading.Lock()
        self._handle: InstanceHandle | None = None
        self._impl: DefaultMQProducerImpl | None = None
        self._state = "new"  # new -> running -> closed
        # message trace (enableMsgTrace / customizedTraceTopic): the dispatcher's settings
        if trace_topic is not None and not enable_trace:
            raise ValueError("trace_topic needs enable_trace=True")
        self._trace_settings: dict[str, Any] | None = dict(
            namesrv=namesrv, trace_topic=trace_topic, access_key=access_key,
            secret_key=secret_key, use_tls=use_tls) if enable_trace else None
        self._tracer: AsyncTraceDispatcher | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> Self:
        """Connect the client instance (the actor system starts with the process's first
        client); sends start it on their own when needed."""
        with self._start_lock:
            if self._state == "running":
                return self
            if self._state == "closed":
                raise ClientClosedError("producer")
            handle = MQClientManager.acquire(self._config, self._role, self.group,
                                             self._explicit_instance)
            try:
                handle.reply_handler = HOLDER.on_reply
                api = MQClientAPI(handle.runtime.remoting_for(self._config.tls),
                                  self._config.with_instance(handle.config.instance_name))
                self._impl = DefaultMQProducerImpl(self.group, handle, api,
                                                   **self._options)  # type: ignore[arg-type]
                if self.auto_batch:
                    self._accumulator = ProduceAccumulator(self._impl, self._release_slot)
                handle.register_producer(self.group, self)
            except BaseException:
                MQClientManager.release(handle, self._role, self.group)
                raise
            self._handle = handle
            self._state = "running"
            if self._trace_settings is not None:
                self._tracer = trace_dispatcher(self.group, "PRODUCE", **self._trace_settings)
                self._tracer.start()
            return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client_id(self) -> str:
        """ip@instanceName of the instance this producer uses."""
        return self._running()[0].client_id

    def _running(self) -> tuple[InstanceHandle, DefaultMQProducerImpl]:
        if self._state != "running":
            if self._state != "new":  # closing or closed: no new sends
                raise ClientClosedError("producer")
            self.start()
        assert self._handle is not None and self._impl is not None
        return self._handle, self._impl

    def flush(self, timeout: float | None = None) -> int:
        """Wait until no async send is in flight (bounded by timeout); how many still are."""
        if self._on_io_thread() and self._inflight:
            raise MQClientError(
                ClientErrorCode.ILLEGAL_ARGUMENT,
                "flush() cannot wait on the client's I/O thread (a Future's done-callback): "
                "the answers it waits for are read there",
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._inflight:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._idle.wait(left)
            return self._inflight

    def close(self, timeout: float = 10.0) -> None:
        """Flush (bounded), unregister the group from every broker, release the instance."""
        with self._start_lock:
            if self._state != "running":
                self._state = "closed"
                return
            self._state = "closing"
        left = self._inflight if self._on_io_thread() else self.flush(timeout)
        if left:
            log.warning("producer %s closed with %d sends still in flight", self.group, left)
        handle = self._handle
        assert handle is not None
        try:
            handle.unregister_producer(self.group)
        finally:
            self._state = "closed"
            MQClientManager.release(handle, self._role, self.group)
            tracer, self._tracer = self._tracer, None
            if tracer is not None:  # after the last send's answer: its record is queued
                tracer.close()

    def _trace(self, msg: Message, result: SendResult, begin_ms: int) -> None:
        """The Pub record of an answered send (SendMessageTraceHookImpl.sendMessageAfter):
        its facts queued, the record made by the dispatcher's worker."""
        tracer = self._tracer
        if tracer is not None:
            tracer.append_sent(self.group, msg, result, begin_ms, now_ms())

    # -- ProducerInner --------------------------------------------------------------------------
    def check_transaction_state(self, addr: str, cmd: RemotingCommand) -> None:
        """A plain producer has no transaction listener (TransactionProducer has)."""
        log.warning("CHECK_TRANSACTION_STATE for %s, which is not a TransactionProducer",
                    self.group)

    # -- sending --------------------------------------------------------------------------------
    def _queue_for(self, impl: DefaultMQProducerImpl, msg: Message,
                   queue: MessageQueue | None, selector: MessageQueueSelector | None,
                   arg: Any) -> MessageQueue | None:  # fmt: skip
        if queue is not None and selector is not None:
            raise ValueError("give a queue or a selector, not both")
        if selector is not None:
            return impl.select_queue(msg, selector, arg)
        if queue is not None and queue.topic != msg.topic:
            raise ValueError(f"queue {queue} is not of topic {msg.topic}")
        return queue

    @staticmethod
    def _timeout_ms(timeout: float | None) -> int | None:
        return None if timeout is None else int(timeout * 1000)

    def send(self, msg: Message, *, queue: MessageQueue | None = None,
             selector: MessageQueueSelector | None = None, arg: Any = None,
             timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer (retries within the timeout budget)."""
        _, impl = self._running()
        mq = self._queue_for(impl, msg, queue, selector, arg)
        begin = now_ms()
        result = impl.send(impl.prepare(msg), msg.flag, queue=mq,
                           timeout_ms=self._timeout_ms(timeout))
        if self._tracer is not None:
            self._trace(msg, result, begin)
        return result

    def send_orderly(self, msg: Message, sharding_key: str, *, timeout: float | None = None
                     ) -> SendResult:  # fmt: skip
        """Send to the queue Java's SelectMessageQueueByHash picks for sharding_key."""
        return self.send(msg, selector=select_by_hash, arg=sharding_key, timeout=timeout)

    def send_async(self, msg: Message, *, callback: SendCallback | None = None,
                   queue: MessageQueue | None = None,
                   selector: MessageQueueSelector | None = None, arg: Any = None,
                   timeout: float | None = None) -> concurrent.futures.Future[SendResult]:
        """Send without waiting: a Future, and callback(result, error) called exactly once
        on the client's callback thread. Blocks (or raises InflightLimitError with
        on_full="raise") while max_inflight sends are outstanding."""
        _, impl = self._running()
        mq = self._queue_for(impl, msg, queue, selector, arg)
        acc = self._accumulator
        if acc is not None and mq is None and acc.batchable(msg):
            validators.check_message(msg, impl.max_message_size)
            return self._dispatch_async(impl, msg, msg.flag, None, callback,
                                        self._timeout_ms(timeout), accumulate=True, traced=msg)
        req = impl.prepare(msg)
        return self._dispatch_async(impl, req, msg.flag, mq, callback, self._timeout_ms(timeout),
                                    traced=msg)  # fmt: skip

    def _acquire_slot(self, block: bool = True) -> None:
        with self._idle:
            if self._inflight >= self.max_inflight:
                if self.on_full == "raise" or not block or self._on_io_thread():
                    # on the client's I/O thread (a send from a Future's done-callback) a wait
                    # would never end: only that thread reads the answers that free a slot
                    raise InflightLimitError(self.max_inflight)
                while self._inflight >= self.max_inflight:
                    if self._state not in ("running", "closing"):
                        raise ClientClosedError("producer")
                    self._idle.wait(0.5)
            self._inflight += 1

    def _on_io_thread(self) -> bool:
        handle = self._handle
        return handle is not None and handle.runtime.loop.in_loop()

    def _release_slot(self, n: int = 1) -> None:
        with self._idle:
            before = self._inflight
            self._inflight = now = before - n
            if now == 0 or now < self.max_inflight <= before:
                self._idle.notify_all()  # flush() waits for 0, a blocked sender for room

    def _dispatch_async(self, impl: DefaultMQProducerImpl, req: SendRequest | Message,
                        flag: int, mq: MessageQueue | None, callback: SendCallback | None,
                        timeout_ms: int | None, *, block: bool = True,
                        accumulate: bool = False, traced: Message | None = None
                        ) -> concurrent.futures.Future[SendResult]:  # fmt: skip
        """traced: the message whose answer gets a Pub record (a traced producer's single
        sends)."""
        self._acquire_slot(block)
        begin = now_ms() if traced is not None and self._tracer is not None else 0
        fut: concurrent.futures.Future[SendResult] = concurrent.futures.Future()
        fut.set_running_or_notify_cancel()
        fired = [False]
        callbacks = self._handle.runtime.callbacks if self._handle is not None else None

        def done(result: SendResult | None, err: MQClientError | None) -> None:
            if fired[0]:
                return
            fired[0] = True
            if err is not None:
                fut.set_exception(err)
            else:
                fut.set_result(result)  # type: ignore[arg-type]
                if begin and traced is not None and result is not None:
                    self._trace(traced, result, begin)
            if callback is not None and callbacks is not None:
                callbacks.submit(lambda: callback(result, err))
            if not accumulate:
                self._release_slot()  # the accumulator releases a whole batch's slots at once

        try:
            if accumulate:
                assert self._accumulator is not None and isinstance(req, Message)
                self._accumulator.add(req, done, timeout_ms)
            else:
                assert isinstance(req, SendRequest)
                impl.send_async(req, done, flag, queue=mq, timeout_ms=timeout_ms)
        except BaseException as exc:
            if not fired[0]:
                done(None, exc if isinstance(exc, MQClientError) else MQClientError(
                    ClientErrorCode.ILLEGAL_ARGUMENT, f"{type(exc).__name__}: {exc}"))
                if accumulate:
                    self._release_slot()
        return fut

    def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None,
                    selector: MessageQueueSelector | None = None, arg: Any = None) -> None:
        """Send without any answer (one attempt; nothing tells whether it was stored)."""
        _, impl = self._running()
        mq = self._queue_for(impl, msg, queue, selector, arg)
        impl.send_oneway(impl.prepare(msg), msg.flag, queue=mq)

    def send_batch(self, msgs: Iterable[Message], *, queue: MessageQueue | None = None,
                   timeout: float | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE: one topic, no delay levels, <= max_message_size in all;
        msg_id lists the items' ids joined by ","."""
        _, impl = self._running()
        batch = list(msgs)
        req = impl.prepare_batch(batch)
        begin = now_ms()
        result = impl.send(req, 0, queue=queue, timeout_ms=self._timeout_ms(timeout))
        if self._tracer is not None:  # one Pub per item (4.9 records one for the whole batch)
            ids, offsets = result.msg_id.split(","), result.offset_msg_id.split(",")
            for item, mid, oid in zip(batch, ids, offsets, strict=False):
                self._trace(item, dataclasses.replace(result, msg_id=mid, offset_msg_id=oid),
                            begin)  # fmt: skip
        return result

    def send_batch_async(self, msgs: Iterable[Message], *,
                         callback: SendCallback | None = None,
                         queue: MessageQueue | None = None,
                         timeout: float | None = None) -> concurrent.futures.Future[SendResult]:
        """send_batch without waiting (one in-flight slot for the whole batch)."""
        _, impl = self._running()
        req = impl.prepare_batch(list(msgs))
        return self._dispatch_async(impl, req, 0, queue, callback, self._timeout_ms(timeout))

    def request(self, msg: Message, timeout: float = 3.0, *, queue: MessageQueue | None = None,
                selector: MessageQueueSelector | None = None, arg: Any = None) -> MessageExt:
        """Send a request and wait for its reply (RocketMQ 4.6+ request-reply)."""
        handle, impl = self._running()
        mq = self._queue_for(impl, msg, queue, selector, arg)
        cid = create_correlation_id()
        fut = HOLDER.add(cid)
        begin = time.monotonic()
        try:
            req = impl.prepare(msg, extra={
                wire.PROPERTY_CORRELATION_ID: cid,
                wire.PROPERTY_MESSAGE_REPLY_TO_CLIENT: handle.client_id,
                wire.PROPERTY_MESSAGE_TTL: str(int(timeout * 1000))})
            impl.send(req, msg.flag, queue=mq, timeout_ms=int(timeout * 1000))
            left = timeout - (time.monotonic() - begin)
            if not fut.done.wait(max(left, 0.0)) or fut.reply is None:
                raise MQClientError(ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION,
                                    f"send request message to <{msg.topic}> OK, but wait reply "
                                    f"message timeout, {int(timeout * 1000)} ms.")
            return fut.reply
        finally:
            HOLDER.remove(cid)

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues (fetchPublishMessageQueues)."""
        _, impl = self._running()
        validators.check_topic(topic)
        return impl.publish_queues(topic)

    # for the asyncio twin: one slot without blocking, or an error
    def _send_async_nonblocking(self, msg: Message | list[Message], batch: bool,
                                mq: MessageQueue | None, timeout: float | None
                                ) -> concurrent.futures.Future[SendResult]:  # fmt: skip
        _, impl = self._running()
        acc = self._accumulator
        if not batch and mq is None and acc is not None and isinstance(msg, Message) \
                and acc.batchable(msg):
            validators.check_message(msg, impl.max_message_size)
            return self._dispatch_async(impl, msg, msg.flag, None, None,
                                        self._timeout_ms(timeout), block=False, accumulate=True,
                                        traced=msg)  # fmt: skip
        if batch:
            assert isinstance(msg, list)
            req, flag = impl.prepare_batch(msg), 0
        else:
            assert isinstance(msg, Message)
            req, flag = impl.prepare(msg), msg.flag
        return self._dispatch_async(impl, req, flag, mq, None, self._timeout_ms(timeout),
                                    block=False, traced=None if batch else msg)  # type: ignore[arg-type]

    def _impl_for_async(self) -> DefaultMQProducerImpl:
        return self._running()[1]


def trace_dispatcher(group: str, kind: str, *, namesrv: str | Sequence[str],
                     trace_topic: str | None, access_key: str | None, secret_key: str | None,
                     use_tls: bool | TlsConfig) -> AsyncTraceDispatcher:  # fmt: skip
    """The AsyncTraceDispatcher of a traced client (kind PRODUCE or CONSUME) with its inner
    producer: 5 s sends, 128,000-byte messages, no auto-batching (Java's trace producer)."""
    inner = Producer(inner_group(group, kind), namesrv=namesrv, send_timeout=SEND_TIMEOUT_S,
                     max_message_size=MAX_MSG_SIZE, auto_batch=False, access_key=access_key,
                     secret_key=secret_key, use_tls=use_tls)  # fmt: skip
    return AsyncTraceDispatcher(inner, trace_topic)
