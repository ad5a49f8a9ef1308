"""Request-reply: the futures waiting for replies, keyed by correlation id.

Mirrors client/producer/RequestFutureHolder.java, RequestResponseFuture.java and
ClientRemotingProcessor.receiveReplyMessage, RocketMQ 4.9.x: request() stamps CORRELATION_ID,
REPLY_TO_CLIENT (this client id) and TTL on the message; the replier's SEND_REPLY_MESSAGE_V2 is
stored and pushed by the broker as PUSH_REPLY_MESSAGE_TO_CLIENT to the requester's heartbeat
connection (the instance actor), relayed through the channel here, and completes the future.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import zlib

from actors.client.records import MessageExt, MessageQueue
from protocol import message as wire
from protocol.command import RemotingCommand
from protocol.message_properties import string_to_properties

log = logging.getLogger(__name__)


def create_correlation_id() -> str:
    """CorrelationIdUtil.createCorrelationId: a random UUID."""
    return str(uuid.uuid4())


def _host(text: str | None) -> str:
    return (text or "").lstrip("/")


def reply_message(cmd: RemotingCommand) -> MessageExt:
    """A PUSH_REPLY_MESSAGE_TO_CLIENT request as the reply MessageExt."""
    ext = cmd.ext_fields or {}
    body = bytes(cmd.body)
    sys_flag = int(ext.get("sysFlag", "0") or 0)
    if sys_flag & wire.COMPRESSED_FLAG:
        try:
            body = zlib.decompress(body)
        except zlib.error:
            log.warning("reply body marked compressed but not zlib: kept as is")
    props = string_to_properties(ext.get("properties"))
    props[wire.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(time.time_ns() // 1_000_000)
    topic = ext.get("topic", "")
    return MessageExt(
        topic=topic, body=body, tags=props.get(wire.PROPERTY_TAGS),
        keys=props.get(wire.PROPERTY_KEYS), properties=props,
        flag=int(ext.get("flag", "0") or 0),
        msg_id=props.get(wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
        queue=MessageQueue(topic, "", int(ext.get("queueId", "0") or 0)),
        born_timestamp=int(ext.get("bornTimestamp", "0") or 0),
        store_timestamp=int(ext.get("storeTimestamp", "0") or 0),
        born_host=_host(ext.get("bornHost")), store_host=_host(ext.get("storeHost")),
        reconsume_times=int(ext.get("reconsumeTimes", "0") or 0), sys_flag=sys_flag)


class RequestResponseFuture:
    """One request waiting for its reply."""

    __slots__ = ("correlation_id", "done", "reply")

    def __init__(self, correlation_id: str) -> None:
        self.correlation_id = correlation_id
        self.done = threading.Event()
        self.reply: MessageExt | None = None


class RequestFutureHolder:
    """Correlation id -> future, process-wide."""

    def __init__(self) -> None:
        self._futures: dict[str, RequestResponseFuture] = {}

    def add(self, correlation_id: str) -> RequestResponseFuture:
        """Register a request about to be sent."""
        fut = self._futures[correlation_id] = RequestResponseFuture(correlation_id)
        return fut

    def remove(self, correlation_id: str) -> None:
        """Forget a request (answered, failed or timed out)."""
        self._futures.pop(correlation_id, None)

    def on_reply(self, _addr: str, cmd: RemotingCommand) -> None:
        """A relayed PUSH_REPLY_MESSAGE_TO_CLIENT."""
        try:
            msg = reply_message(cmd)
        except (ValueError, KeyError) as exc:
            log.warning("reply message undecodable: %s", exc)
            return
        cid = msg.properties.get(wire.PROPERTY_CORRELATION_ID)
        fut = self._futures.pop(cid or "", None)
        if fut is None:
            log.info("reply with correlation id %s has no waiting request (timed out?)", cid)
            return
        fut.reply = msg
        fut.done.set()


HOLDER = RequestFutureHolder()
