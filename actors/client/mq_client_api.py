"""Typed calls for every request the clients make, over a RemotingClient.

Mirrors client/impl/MQClientAPIImpl.java, RocketMQ 4.9.x: each method builds the request
(header fields by their wire names), invokes it and turns the response into a value or an
MQBrokerError. The builds and reads live in actors.client.client_requests (sans-IO values the
admin tools send too); this class carries them, and the send and pull paths. Without
`callback` a call is sync (the user's process); with
`callback(result, error)` it is async and the callback runs exactly once (the only form an
actor may use). Name-server calls try every configured name server in turn
(NettyRemotingClient's namesrv selection).
"""

from __future__ import annotations

import functools
import itertools
import json.encoder
import logging
import struct
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from actors.client import client_requests as rq
from actors.client.client_config import ClientConfig
from actors.client.client_requests import ClientRequest, ext_of
from actors.client.errors import ClientErrorCode, MQBrokerError, MQClientError, RemotingError
from actors.client.mq_client_instance import DEFAULT_TOPIC_QUEUE_NUMS
from actors.client.records import MessageExt, SendResult, SendStatus
from actors.client.remoting_client import RemotingClient
from protocol.bodies import (
    HeartbeatData,
    LockBatchRequestBody,
    MessageQueue,
    TopicRouteData,
)
from protocol.codes import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    CURRENT_VERSION,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from protocol.command import RemotingCommand, next_opaque
from protocol.headers import EndTransactionRequestHeader

log = logging.getLogger(__name__)

_js = json.encoder.encode_basestring_ascii  # a JSON string literal (C when available)
_PREFIX = struct.Struct(">ii")  # total length, header length (serialize type JSON = 0)

T = TypeVar("T")
ResultCallback = Callable[[Any, MQClientError | None], None]

SEND_STATUS: Final = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


class SendRequest:
    """One message (or batch) made ready to send: properties, body, sysFlag, UNIQ_KEY."""

    __slots__ = ("batch", "body", "code", "max_reconsume", "msg_id", "properties",
                 "reconsume_times", "sys_flag", "topic")

    def __init__(self, topic: str, body: bytes, properties: str, sys_flag: int, msg_id: str,
                 *, batch: bool = False, code: int = RequestCode.SEND_MESSAGE_V2,
                 reconsume_times: int = 0, max_reconsume: int | None = None) -> None:
        self.topic = topic
        self.body = body
        self.properties = properties
        self.sys_flag = sys_flag
        self.msg_id = msg_id
        self.batch = batch
        self.code = code
        self.reconsume_times = reconsume_times
        self.max_reconsume = max_reconsume


def _send_ext(group: str, req: SendRequest, mq: MessageQueue, flag: int) -> dict[str, str]:
    """SendMessageRequestHeaderV2's one-letter fields (a..n) of req to mq."""
    ext = {"a": group, "b": req.topic, "c": AUTO_CREATE_TOPIC_KEY_TOPIC,
           "d": str(DEFAULT_TOPIC_QUEUE_NUMS), "e": str(mq.queue_id), "f": str(req.sys_flag),
           "g": str(time.time_ns() // 1_000_000), "h": str(flag), "i": req.properties,
           "j": str(req.reconsume_times), "k": "false",
           "m": "true" if req.batch else "false", "n": mq.broker_name}
    if req.max_reconsume is not None:
        ext["l"] = str(req.max_reconsume)
    return ext


def send_message_command(group: str, req: SendRequest, mq: MessageQueue, flag: int = 0,
                         serialize_type: int = SerializeType.JSON) -> RemotingCommand:
    """sendMessage's request: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (req.code) with the V2
    header, as every producer of ours sends it (the clients, the admin tools, the Spark
    sink)."""
    cmd = RemotingCommand.request(req.code, _send_ext(group, req, mq, flag), req.body,
                                  serialize_type=serialize_type)  # fmt: skip
    cmd.language = LanguageCode.PYTHON
    return cmd


def send_message_frame(group: str, req: SendRequest, mq: MessageQueue, flag: int = 0,
                       serialize_type: int = SerializeType.JSON) -> tuple[int, bytes]:
    """(opaque, encoded frame) of send_message_command's request; a JSON header is written
    directly (the same bytes, without building the command)."""
    if serialize_type != SerializeType.JSON:
        cmd = send_message_command(group, req, mq, flag, serialize_type)
        return cmd.opaque, cmd.encode()
    opaque = next_opaque()
    mr = "" if req.max_reconsume is None else f'"l":"{req.max_reconsume:d}",'
    header = (
        f'{{"code":{req.code:d},"extFields":{{"a":{_js(group)},"b":{_js(req.topic)},'
        f'"c":"{AUTO_CREATE_TOPIC_KEY_TOPIC}","d":"{DEFAULT_TOPIC_QUEUE_NUMS:d}",'
        f'"e":"{mq.queue_id:d}","f":"{req.sys_flag:d}",'
        f'"g":"{time.time_ns() // 1_000_000:d}","h":"{flag:d}","i":{_js(req.properties)},'
        f'"j":"{req.reconsume_times:d}","k":"false",{mr}'
        f'"m":"{"true" if req.batch else "false"}","n":{_js(mq.broker_name)}}},'
        f'"flag":0,"language":"PYTHON","opaque":{opaque:d},'
        f'"serializeTypeCurrentRPC":"JSON","version":{CURRENT_VERSION:d}}}'
    ).encode()
    body = req.body
    return opaque, b"".join((_PREFIX.pack(4 + len(header) + len(body), len(header)),
                             header, body))


def process_send_response(broker_name: str, topic: str, msg_id: str, resp: RemotingCommand,
                          addr: str, mq: MessageQueue | None = None) -> SendResult:  # fmt: skip
    """A send's response as a SendResult, or MQBrokerError for the other codes (`mq`: the
    queue the request named, reused when the broker stored it there)."""
    status = SEND_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(resp.code, resp.remark, addr)
    ext = ext_of(resp)
    try:
        queue_id = int(ext["queueId"])
        queue_offset = int(ext["queueOffset"])
    except (KeyError, ValueError):
        raise MQBrokerError(ResponseCode.SYSTEM_ERROR, "send response without queueId / "
                            "queueOffset", addr) from None  # fmt: skip
    if mq is None or mq.queue_id != queue_id or mq.topic != topic:
        mq = MessageQueue(topic, broker_name, queue_id)
    return SendResult(
        status, msg_id, ext.get("msgId", ""), mq,
        queue_offset, ext.get("transactionId"), ext.get("MSG_REGION") or "DefaultRegion",
        ext.get("TRACE_ON") != "false")


def _parsed(addr: str, parse: Callable[[RemotingCommand, str], T], callback: ResultCallback
            ) -> Callable[[RemotingCommand | None, MQClientError | None], None]:  # fmt: skip
    """A RemotingClient callback calling callback(parse(response), None) or (None, error)."""

    def done(resp: RemotingCommand | None, err: MQClientError | None) -> None:
        if err is not None or resp is None:
            callback(None, err or RemotingError(ClientErrorCode.ACCESS_BROKER_TIMEOUT,
                                                "no response"))
            return
        try:
            value = parse(resp, addr)
        except MQClientError as exc:
            callback(None, exc)
            return
        callback(value, None)

    return done


class MQClientAPI:
    """Requests to name servers and brokers over one RemotingClient."""

    def __init__(self, remoting: RemotingClient, config: ClientConfig) -> None:
        self.remoting = remoting
        self.config = config
        self._ns_index = itertools.count()

    # -- plumbing -----------------------------------------------------------------------------
    def request(self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
                ) -> RemotingCommand:  # fmt: skip
        """A request in the configured header serialization."""
        return RemotingCommand.request(code, ext, body,
                                       serialize_type=self.config.serialize_type)

    def call(self, addr: str, cmd: RemotingCommand, timeout_ms: float,
             parse: Callable[[RemotingCommand, str], T],
             callback: ResultCallback | None = None) -> T | None:  # fmt: skip
        """Invoke cmd; sync returns parse(response), async calls callback(parse(...), err)."""
        self.config.sign(cmd)
        if callback is None:
            return parse(self.remoting.invoke_sync(addr, cmd, timeout_ms), addr)
        self.remoting.invoke_async(addr, cmd, timeout_ms, _parsed(addr, parse, callback))
        return None

    def call_frame(self, addr: str, opaque: int, frame: bytes, timeout_ms: float,
                   parse: Callable[[RemotingCommand, str], T],
                   callback: ResultCallback) -> None:  # fmt: skip
        """call() of a request already encoded whose opaque is `opaque`, async (signing, when
        this client signs, was the encoder's: client_requests.EncodedPullRequests)."""
        self.remoting.invoke_async_frame(addr, opaque, frame, timeout_ms,
                                         _parsed(addr, parse, callback))  # fmt: skip

    def _namesrv_order(self) -> list[str]:
        addrs = self.config.namesrv_addrs
        start = next(self._ns_index) % len(addrs)
        return [*addrs[start:], *addrs[:start]]

    def call_namesrv(self, cmd_factory: Callable[[], RemotingCommand], timeout_ms: float,
                     parse: Callable[[RemotingCommand, str], T],
                     callback: ResultCallback | None = None) -> T | None:  # fmt: skip
        """Invoke on one name server, the next one after a connection failure or timeout."""
        order = self._namesrv_order()
        if callback is None:
            last: MQClientError | None = None
            for addr in order:
                try:
                    cmd = self.config.sign(cmd_factory())
                    return parse(self.remoting.invoke_sync(addr, cmd, timeout_ms), addr)
                except RemotingError as exc:
                    last = exc
                    log.info("name server %s failed: %s", addr, exc)
            assert last is not None
            raise last

        _NamesrvCall(self, order, cmd_factory, timeout_ms, parse, callback).attempt(0)
        return None

    def ask(self, addr: str, req: ClientRequest[T], timeout_ms: float,
            callback: ResultCallback | None = None) -> T | None:  # fmt: skip
        """One of client_requests' requests to `addr` (see call)."""
        return self.call(addr, req.command(self.config.serialize_type), timeout_ms, req.parse,
                         callback)  # fmt: skip

    def oneway(self, addr: str, req: ClientRequest[Any]) -> None:
        """One of client_requests' requests to `addr`, oneway (signed, not answered)."""
        cmd = req.command(self.config.serialize_type)
        self.remoting.invoke_oneway(addr, self.config.sign(cmd))

    # -- name server --------------------------------------------------------------------------
    def get_topic_route_from_namesrv(self, topic: str, timeout_ms: float,
                                     callback: ResultCallback | None = None
                                     ) -> TopicRouteData | None:  # fmt: skip
        """GET_ROUTEINFO_BY_TOPIC; None when the topic does not exist (TOPIC_NOT_EXIST)."""
        req = rq.topic_route(topic)
        return self.call_namesrv(lambda: req.command(self.config.serialize_type), timeout_ms,
                                 req.parse, callback)  # fmt: skip

    # -- heartbeats ---------------------------------------------------------------------------
    def send_heartbeat(self, addr: str, hb: HeartbeatData, timeout_ms: float,
                       callback: ResultCallback | None = None) -> int | None:  # fmt: skip
        """HEART_BEAT; the broker's version."""
        return self.ask(addr, rq.heartbeat(hb), timeout_ms, callback)

    def unregister_client(self, addr: str, client_id: str, producer_group: str | None,
                          consumer_group: str | None, timeout_ms: float,
                          callback: ResultCallback | None = None) -> None:  # fmt: skip
        """UNREGISTER_CLIENT for one group."""
        self.ask(addr, rq.unregister_client(client_id, producer_group, consumer_group),
                 timeout_ms, callback)  # fmt: skip

    # -- producer -----------------------------------------------------------------------------
    def end_transaction_oneway(self, addr: str, header: EndTransactionRequestHeader,
                               remark: str | None) -> None:  # fmt: skip
        """END_TRANSACTION, oneway (commit / rollback / unknown)."""
        cmd = self.request(RequestCode.END_TRANSACTION, header.to_ext())
        cmd.remark = remark
        self.remoting.invoke_oneway(addr, self.config.sign(cmd))

    # -- consumer -----------------------------------------------------------------------------
    def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int,
                              timeout_ms: float, callback: ResultCallback | None = None
                              ) -> int | None:  # fmt: skip
        """QUERY_CONSUMER_OFFSET; -1 when the broker has no offset (QUERY_NOT_FOUND)."""
        return self.ask(addr, rq.query_consumer_offset(group, topic, queue_id), timeout_ms,
                        callback)  # fmt: skip

    def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int,
                               offset: int, timeout_ms: float,
                               callback: ResultCallback | None = None) -> None:  # fmt: skip
        """UPDATE_CONSUMER_OFFSET, answered."""
        self.ask(addr, rq.update_consumer_offset(group, topic, queue_id, offset), timeout_ms,
                 callback)  # fmt: skip

    def update_consumer_offset_oneway(self, addr: str, group: str, topic: str, queue_id: int,
                                      offset: int) -> None:  # fmt: skip
        """UPDATE_CONSUMER_OFFSET, oneway (persistConsumerOffset)."""
        self.oneway(addr, rq.update_consumer_offset(group, topic, queue_id, offset))

    def get_max_offset(self, addr: str, topic: str, queue_id: int, timeout_ms: float,
                       callback: ResultCallback | None = None) -> int | None:  # fmt: skip
        """GET_MAX_OFFSET: the queue's next offset."""
        return self.ask(addr, rq.max_offset(topic, queue_id), timeout_ms, callback)

    def get_min_offset(self, addr: str, topic: str, queue_id: int, timeout_ms: float,
                       callback: ResultCallback | None = None) -> int | None:  # fmt: skip
        """GET_MIN_OFFSET: the queue's first offset still stored."""
        return self.ask(addr, rq.min_offset(topic, queue_id), timeout_ms, callback)

    def search_offset(self, addr: str, topic: str, queue_id: int, timestamp_ms: int,
                      timeout_ms: float, callback: ResultCallback | None = None
                      ) -> int | None:  # fmt: skip
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        return self.ask(addr, rq.search_offset(topic, queue_id, timestamp_ms), timeout_ms,
                        callback)  # fmt: skip

    def get_consumer_id_list_by_group(self, addr: str, group: str, timeout_ms: float,
                                      callback: ResultCallback | None = None
                                      ) -> list[str] | None:  # fmt: skip
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's live members."""
        return self.ask(addr, rq.consumer_id_list(group), timeout_ms, callback)

    def lock_batch_mq(self, addr: str, body: LockBatchRequestBody, timeout_ms: float,
                      callback: ResultCallback | None = None) -> set[MessageQueue] | None:
        """LOCK_BATCH_MQ: the queues this client now holds the broker lock of."""
        return self.ask(addr, rq.lock_batch_mq(body), timeout_ms, callback)

    def unlock_batch_mq(self, addr: str, body: Any, timeout_ms: float, oneway: bool = False,
                        callback: ResultCallback | None = None) -> None:  # fmt: skip
        """UNLOCK_BATCH_MQ (an UnlockBatchRequestBody), answered or oneway."""
        req = rq.unlock_batch_mq(body.to_json())
        if oneway:
            self.oneway(addr, req)
            return
        self.ask(addr, req, timeout_ms, callback)

    def consumer_send_message_back(self, addr: str, msg: MessageExt, group: str,
                                   delay_level: int, timeout_ms: float,
                                   max_consume_retry_times: int,
                                   callback: ResultCallback | None = None) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-stores the message in %RETRY%group (or the
        DLQ past max_consume_retry_times)."""
        self.ask(addr, rq.consumer_send_msg_back(msg.commitlog_offset, msg.msg_id, msg.topic,
                                                 group, delay_level, max_consume_retry_times),
                 timeout_ms, callback)  # fmt: skip


class _NamesrvCall:
    """An async name-server call trying each server in turn; each answer callback is a
    partial of a method, so nothing refers back to it (no cyclic garbage per call)."""

    __slots__ = ("api", "callback", "cmd_factory", "order", "parse", "timeout_ms")

    def __init__(self, api: MQClientAPI, order: list[str],
                 cmd_factory: Callable[[], RemotingCommand], timeout_ms: float,
                 parse: Callable[[RemotingCommand, str], Any],
                 callback: ResultCallback) -> None:  # fmt: skip
        self.api = api
        self.order = order
        self.cmd_factory = cmd_factory
        self.timeout_ms = timeout_ms
        self.parse = parse
        self.callback = callback

    def attempt(self, i: int) -> None:
        self.api.call(self.order[i], self.cmd_factory(), self.timeout_ms, self.parse,
                      functools.partial(self.answered, i))  # fmt: skip

    def answered(self, i: int, value: Any, err: MQClientError | None) -> None:
        if isinstance(err, RemotingError) and i + 1 < len(self.order):
            log.info("name server %s failed: %s", self.order[i], err)
            self.attempt(i + 1)
        else:
            self.callback(value, err)
