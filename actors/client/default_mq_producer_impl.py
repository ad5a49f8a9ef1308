"""The producer's send path: queue selection, retries within one deadline, the send request.

Mirrors client/impl/producer/DefaultMQProducerImpl.java, RocketMQ 4.9.x: sendDefaultImpl (up
to 1 + retryTimesWhenSendFailed attempts within sendMsgTimeout, a new queue each time avoiding
the last broker, retry on connection errors, timeouts and the retryable broker codes, a
non-SEND_OK status retried only with retryAnotherBrokerWhenNotStoreOK), sendKernelImpl (UNIQ_KEY
set once so every attempt carries the same id, bodies over compressMsgBodyOverHowmuch zlib'd
with 4.9.8's sysFlag bits, SEND_MESSAGE_V2's one-letter header), sendSelectImpl (an explicit
queue or a selector: one attempt per queue choice, retried on the same choice), batches
(SEND_BATCH_MESSAGE, never compressed).

Deliberate differences (docs/CLIENT.md §5): async sends follow the same retry policy as sync
ones inside the same deadline (Java's async path tries once), SYSTEM_BUSY is retried too, and a
completion is reported exactly once. The request goes from the calling thread to the broker; a
sync caller reads its own response (remoting_client.py), so one send in flight crosses no
thread and no actor.
"""

from __future__ import annotations

import functools
import json
import json.encoder
import logging
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from actors.client import validators
from actors.client.errors import (
    ClientErrorCode,
    MQBrokerError,
    MQClientError,
    RemotingError,
)
from actors.client.latency_fault_tolerance import MQFaultStrategy
from actors.client.message_queue_selector import MessageQueueSelector
from actors.client.mq_client_api import (
    MQClientAPI,
    SendRequest,
    process_send_response,
    send_message_command,
    send_message_frame,
)
from actors.client.records import Message, MessageQueue, SendResult
from actors.client.send_retry import SendRetry
from actors.client.topic_publish_info import TopicPublishInfo
from protocol import message as wire
from protocol.codes import (
    RETRY_GROUP_TOPIC_PREFIX,
    RequestCode,
    ResponseCode,
)
from protocol.command import RemotingCommand
from protocol.message_batch import encode_batch_raw
from protocol.message_client_id_setter import create_uniq_id
from protocol.message_properties import properties_to_string

_js = json.encoder.encode_basestring_ascii  # a JSON string literal (C when available)
_PREFIX = struct.Struct(">ii")  # total length, header length (serialize type JSON = 0)

log = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | None, MQClientError | None], None]


def _isolates(error: MQClientError) -> bool:
    """Whether a failed attempt marks its broker unavailable for a while (the fault strategy's
    isolation): a broker that answered busy is not dead, one whose address is unknown was never
    asked."""
    if isinstance(error, MQBrokerError):
        return error.code != ResponseCode.SYSTEM_BUSY
    return isinstance(error, RemotingError)


def now_ms() -> int:
    """Wall-clock milliseconds."""
    return time.time_ns() // 1_000_000


class PublishRoutes(Protocol):
    """What a producer needs of its client instance (mq_client_manager.InstanceHandle): the
    topics' publish infos and the brokers' addresses (MQClientInstance's
    tryToFindTopicPublishInfo / findBrokerAddressInPublish)."""

    publish_infos: dict[str, TopicPublishInfo]  # topic -> what is known of it

    def publish_info(self, topic: str, timeout_s: float = ...) -> TopicPublishInfo:
        """The topic's publish info, fetched through the instance when not known yet."""
        ...

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master address of broker_name."""
        ...

def plain_properties(msg_id: str, msg: Message) -> str:
    """The properties string of a message without user properties: UNIQ_KEY, WAIT, and its
    tags, keys and delay level when set."""
    props = f"UNIQ_KEY\x01{msg_id}\x02WAIT\x01true"
    if msg.tags:
        props += f"\x02TAGS\x01{msg.tags}"
    if msg.keys:
        props += f"\x02KEYS\x01{msg.keys}"
    if msg.delay_level > 0:
        props += f"\x02DELAY\x01{msg.delay_level}"
    return props


class DefaultMQProducerImpl:
    """Sends for one producer group through the process's RemotingClient."""

    def __init__(self, group: str, handle: PublishRoutes, api: MQClientAPI, *,
                 send_timeout_ms: int = 3000, retries: int = 2,
                 retry_another_broker_when_not_store_ok: bool = False,
                 compress_over: int = wire.COMPRESS_BODY_OVER,
                 compress_level: int = wire.COMPRESS_LEVEL,
                 max_message_size: int = validators.MAX_MESSAGE_SIZE,
                 latency_fault_tolerance: bool = True) -> None:  # fmt: skip
        self.group = group
        self.handle = handle
        self.api = api
        self.remoting = api.remoting
        self.serialize_type = api.config.serialize_type
        self.send_timeout_ms = send_timeout_ms
        self.retries = retries
        self.retry_another_broker = retry_another_broker_when_not_store_ok
        self.compress_over = compress_over
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.fault = MQFaultStrategy(latency_fault_tolerance)

    # -- building requests ----------------------------------------------------------------------
    def prepare(self, msg: Message, *, extra: dict[str, str] | None = None) -> SendRequest:
        """Validate msg and fix what every attempt sends (UNIQ_KEY, compression, sysFlag).

        msg.properties are the user's (validators.check_message refuses system names);
        `extra` holds what the client itself sets (TRAN_MSG, CORRELATION_ID, a retry's
        RETRY_TOPIC, ...), added unchecked."""
        validators.check_message(msg, self.max_message_size)
        if not msg.properties and not extra and len(msg.body) <= self.compress_over:
            return self._prepare_plain(msg)
        props = msg.wire_properties()
        if extra:
            props.update(extra)
        msg_id = props.get(wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not msg_id:
            msg_id = props[wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
        props.setdefault(wire.PROPERTY_WAIT_STORE_MSG_OK, "true")
        sys_flag = 0
        body = msg.body
        if len(body) > self.compress_over:
            body = wire.compress_body(body, self.compress_level)
            sys_flag |= wire.COMPRESSED_ZLIB_SYSFLAG
        if props.get(wire.PROPERTY_TRANSACTION_PREPARED) == "true":
            sys_flag |= wire.TRANSACTION_PREPARED_TYPE
        reconsume, max_reconsume = 0, None
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            rt = props.pop(wire.PROPERTY_RECONSUME_TIME, None)
            mr = props.pop(wire.PROPERTY_MAX_RECONSUME_TIMES, None)
            reconsume = int(rt) if rt else 0
            max_reconsume = int(mr) if mr else None
        return SendRequest(msg.topic, body, properties_to_string(props), sys_flag, msg_id,
                           reconsume_times=reconsume, max_reconsume=max_reconsume)

    def _prepare_plain(self, msg: Message) -> SendRequest:
        """prepare() for the common message: no user properties, an uncompressed body."""
        msg_id = create_uniq_id()
        return SendRequest(msg.topic, msg.body, plain_properties(msg_id, msg), 0, msg_id)

    def prepare_batch(self, msgs: Sequence[Message], *, validated: bool = False
                      ) -> SendRequest:  # fmt: skip
        """A SEND_BATCH_MESSAGE body (each item its own UNIQ_KEY; never compressed)."""
        if not validated:
            validators.check_batch(msgs, self.max_message_size)
        items: list[tuple[int, bytes, str]] = []
        ids: list[str] = []
        for m in msgs:
            if m.properties or m.delay_level > 0:
                props = m.wire_properties()
                uid = props.get(wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if not uid:
                    uid = props[wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
                props.setdefault(wire.PROPERTY_WAIT_STORE_MSG_OK, "true")
                text = properties_to_string(props)
            else:  # the common message: tags and keys at most, written as prepare() does
                uid = create_uniq_id()
                text = plain_properties(uid, m)
            ids.append(uid)
            items.append((m.flag, m.body, text))
        body = encode_batch_raw(items)
        if len(body) > self.max_message_size:
            raise validators.MessageValidationError(
                13, f"the batch body size {len(body)} is over max value, MAX: "
                    f"{self.max_message_size}")
        return SendRequest(msgs[0].topic, body, "", 0, ",".join(ids), batch=True,
                           code=RequestCode.SEND_BATCH_MESSAGE)

    def _frame(self, req: SendRequest, mq: MessageQueue, flag: int) -> tuple[int, bytes]:
        config = self.api.config
        if config.credentials is not None:  # signed: the fields are built, then signed
            cmd = config.sign(send_message_command(self.group, req, mq, flag,
                                                   self.serialize_type))  # fmt: skip
            return cmd.opaque, cmd.encode()
        return send_message_frame(self.group, req, mq, flag, self.serialize_type)

    def _broker_addr(self, mq: MessageQueue) -> str:
        addr = self.handle.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            self.handle.publish_info(mq.topic)  # the route may just have arrived
            addr = self.handle.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION,
                                f"The broker[{mq.broker_name}] not exist")
        return addr

    # -- sync ---------------------------------------------------------------------------------
    def send(self, req: SendRequest, flag: int = 0, *, queue: MessageQueue | None = None,
             timeout_ms: int | None = None) -> SendResult:  # fmt: skip
        """sendDefaultImpl (or one queue when given), sync."""
        retry, info = self._retry(req, queue, timeout_ms)
        while retry.more():
            mq = queue if queue is not None else self._select(info, retry.last_broker)
            left_ms = retry.start(mq.broker_name, time.monotonic())
            if left_ms is None:
                break
            t0 = time.monotonic()
            try:
                addr = self._broker_addr(mq)
                opaque, frame = self._frame(req, mq, flag)
                resp = self.remoting.invoke_sync_frame(addr, opaque, frame, left_ms)
                result = process_send_response(mq.broker_name, req.topic, req.msg_id, resp, addr,
                                               mq)  # fmt: skip
            except MQClientError as exc:
                self._fault(mq, t0, _isolates(exc))
                if retry.failed(exc):
                    continue
                break
            self._fault(mq, t0, False)
            if retry.answered(result, self.retry_another_broker):
                return result
        outcome = retry.outcome(time.monotonic())
        if isinstance(outcome, MQClientError):
            raise outcome
        return outcome

    def _retry(self, req: SendRequest, queue: MessageQueue | None, timeout_ms: int | None
               ) -> tuple[SendRetry, TopicPublishInfo | None]:  # fmt: skip
        """The send's retry policy (one attempt when the caller chose the queue: sendSelectImpl)
        and the topic's route when the queue is ours to choose."""
        timeout = self.send_timeout_ms if timeout_ms is None else timeout_ms
        retry = SendRetry(req.topic, 1 + self.retries if queue is None else 1, timeout,
                          time.monotonic())  # fmt: skip
        info = None if queue is not None else self.handle.publish_info(req.topic)
        return retry, info

    def _select(self, info: TopicPublishInfo | None, last_broker: str | None) -> MessageQueue:
        assert info is not None
        return self.fault.select_one_message_queue(info, last_broker, now_ms())

    def _fault(self, mq: MessageQueue, t0: float, isolation: bool) -> None:
        if self.fault.enabled:
            self.fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000),
                                         isolation, now_ms())

    # -- async --------------------------------------------------------------------------------
    def send_async(self, req: SendRequest, done: SendCallback, flag: int = 0, *,
                   queue: MessageQueue | None = None, timeout_ms: int | None = None) -> None:
        """sendDefaultImpl with the sync retry policy, without blocking on the answer.

        done(result, error) runs exactly once, on the thread that read the final answer."""
        try:
            retry, info = self._retry(req, queue, timeout_ms)
        except MQClientError as exc:
            done(None, exc)
            return
        AsyncSend(self, req, done, flag, queue, retry, info).attempt()

    # -- oneway -------------------------------------------------------------------------------
    def send_oneway(self, req: SendRequest, flag: int = 0, *,
                    queue: MessageQueue | None = None) -> None:  # fmt: skip
        """One attempt, nothing awaited (a write failure raises)."""
        if queue is None:
            queue = self._select(self.handle.publish_info(req.topic), None)
        cmd = self.api.config.sign(send_message_command(self.group, req, queue, flag,
                                                        self.serialize_type))  # fmt: skip
        self.remoting.invoke_oneway(self._broker_addr(queue), cmd)

    # -- queues -------------------------------------------------------------------------------
    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues (fetched through the instance when new)."""
        return list(self.handle.publish_info(topic).message_queue_list)

    def select_queue(self, msg: Message, selector: MessageQueueSelector, arg: Any
                     ) -> MessageQueue:  # fmt: skip
        """sendSelectImpl's choice: the selector over the topic's queues."""
        mqs = self.publish_queues(msg.topic)
        mq = selector(mqs, msg, arg)
        if not isinstance(mq, MessageQueue):
            raise MQClientError(ClientErrorCode.ILLEGAL_ARGUMENT,
                                f"the selector returned {mq!r}, not a MessageQueue")
        return mq


class AsyncSend:
    """One send_async in flight: its attempts under the shared retry policy (SendRetry), each
    answer read on the thread that read it. Its state is its fields and each attempt's answer
    callback a partial of a method: nothing refers back to it, so reference counting frees it
    once answered (nested closures that called each other made ~40 objects of cyclic garbage
    per send, and the cyclic collector then took more time than the sends)."""

    __slots__ = ("done", "flag", "impl", "info", "queue", "req", "retry")

    def __init__(self, impl: DefaultMQProducerImpl, req: SendRequest, done: SendCallback,
                 flag: int, queue: MessageQueue | None, retry: SendRetry,
                 info: TopicPublishInfo | None) -> None:  # fmt: skip
        self.impl = impl
        self.req = req
        self.done = done
        self.flag = flag
        self.queue = queue
        self.retry = retry
        self.info = info

    def finish(self) -> None:
        """The retry policy's outcome to the caller."""
        outcome = self.retry.outcome(time.monotonic())
        if isinstance(outcome, MQClientError):
            self.done(None, outcome)
        else:
            self.done(outcome, None)

    def attempt(self) -> None:
        """The next attempt (on the chosen queue, or the one the fault strategy picks), or
        the outcome when the policy allows no more."""
        impl, retry = self.impl, self.retry
        while retry.more():
            mq = self.queue
            if mq is None:
                mq = impl._select(self.info, retry.last_broker)
            left_ms = retry.start(mq.broker_name, time.monotonic())
            if left_ms is None:
                break
            t0 = time.monotonic()
            try:
                addr = impl._broker_addr(mq)
            except MQClientError as exc:
                impl._fault(mq, t0, False)
                if retry.failed(exc):
                    continue
                break
            opaque, frame = impl._frame(self.req, mq, self.flag)
            impl.remoting.invoke_async_frame(addr, opaque, frame, left_ms,
                                             functools.partial(self.answered, mq, addr, t0))
            return
        self.finish()

    def answered(self, mq: MessageQueue, addr: str, t0: float, resp: RemotingCommand | None,
                 err: MQClientError | None) -> None:  # fmt: skip
        """An attempt's answer (or its failure): the result, another attempt, or the outcome."""
        impl, retry = self.impl, self.retry
        if err is None and resp is not None:
            try:
                result = process_send_response(mq.broker_name, self.req.topic, self.req.msg_id,
                                               resp, addr, mq)  # fmt: skip
            except MQClientError as exc:
                err = exc
            else:
                impl._fault(mq, t0, False)
                if retry.answered(result, impl.retry_another_broker):
                    self.done(result, None)
                else:
                    self.attempt()
                return
        if err is None:
            err = MQClientError(ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION,
                                "the send got no answer")
        impl._fault(mq, t0, _isolates(err))
        if retry.failed(err):
            self.attempt()
        else:
            self.finish()
