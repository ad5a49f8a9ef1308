"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): a request-reply answer.

Mirrors broker/processor/ReplyMessageProcessor.java, RocketMQ 4.9.x: the replier's message is
stored in its topic (storeReplyMessageEnable) and pushed to the requester named by
REPLY_TO_CLIENT (PUSH_REPLY_MESSAGE_TO_CLIENT, Broker2Client.callClient); the replier's answer
waits for the push's answer. The send group's core (actors.broker.processors.send) is built on
it: the same single store writer serves both.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Final

from actors.broker.context import BrokerContext
from actors.broker.processors.abstract_send import (
    CACHE_LIMIT,
    AbstractSendMessageProcessor,
    Reject,
)
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import ReplyMessageRequestHeader, decode_send_header
from protocol.message import (
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_PUSH_REPLY_TIME,
    parse_properties,
)
from protocol.message_properties import properties_to_string
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.put_message_result import PutMessageStatus, offset_msg_id

log = logging.getLogger(__name__)

REPLY_CODES: Final = frozenset({int(RC.SEND_REPLY_MESSAGE), int(RC.SEND_REPLY_MESSAGE_V2)})
PUSH_REPLY_TIMEOUT_MS: Final = 10_000  # Broker2Client.callClient's invokeSync timeout
_PS = PutMessageStatus


@dataclass(slots=True)
class _PushWait:
    """A reply message pushed to its requester: the replier's response waits for the answer."""

    conn_id: int  # the replier's connection (None response for a oneway replier: not kept)
    resp: RemotingCommand
    client_id: str
    target_conn: int
    deadline_ms: int
    end_offset: int = 0  # where the stored reply ends (0: not stored): SYNC_FLUSH waits for it



class ReplyMessageProcessor(AbstractSendMessageProcessor):
    """The reply codes: store, push to the requester, answer the replier with the outcome."""

    def __init__(self, ctx: BrokerContext, rng: random.Random | None = None) -> None:
        super().__init__(ctx, rng)
        self.push_waits: dict[int, _PushWait] = {}  # opaque of a reply push -> its replier
        self._closed_conns: set[int] = set()  # connections closed (ids are never reused)

    def process_reply(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Store the reply in its topic (storeReplyMessageEnable) and push it to the producer
        named by REPLY_TO_CLIENT (PUSH_REPLY_MESSAGE_TO_CLIENT); the replier's response waits
        for the push's answer and is SYSTEM_ERROR when the push fails. As in Java, the record
        keeps the request's properties text as it came and sysFlag 0."""
        cmd = req.cmd
        h = decode_send_header(cmd.code, cmd.ext_fields)
        try:
            _tc, queue_id = self._msg_check(cmd, h.topic, h.queue_id, req.peer)
        except Reject as r:
            return cmd.make_response(r.code, r.remark, self._base_ext())
        text = h.properties or ""
        props = parse_properties(text) if text else {}
        ext = self._base_ext()
        end_offset = 0
        if self.bc.storeReplyMessageEnable:
            result = self.store.put_message(
                MessageExtBrokerInner(
                    h.topic, cmd.body, h.flag, {}, queue_id, 0, h.born_timestamp,
                    self._born_host(req.peer), self.store_host, h.reconsume_times or 0,
                    properties_string=text,
                ),
                now_ms,
            )  # fmt: skip
            if result.status in (_PS.PUT_OK, _PS.FLUSH_DISK_TIMEOUT, _PS.FLUSH_SLAVE_TIMEOUT,
                                 _PS.SLAVE_NOT_AVAILABLE):  # fmt: skip
                end_offset = result.end_offset
                self._count_put(h.topic, 1, result.wrote_bytes)
                ext.update(msgId=offset_msg_id(self.store_host, result.wrote_offset),
                           queueId=str(queue_id), queueOffset=str(result.logics_offset))
            else:
                log.warning("reply message not stored: %s", result.status.name)
        if "msgId" not in ext:  # Java writes zeros when the push went out and nothing stored
            ext_ok = {**ext, "msgId": "0", "queueId": str(queue_id), "queueOffset": "0"}
        else:
            ext_ok = ext
        resp = cmd.make_response(RS.SUCCESS, None, ext_ok)
        client_id = props.get(PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if client_id is None:
            log.warning("%s is null, can not reply message", PROPERTY_MESSAGE_REPLY_TO_CLIENT)
            return self._reply_stored(req.conn_id, cmd.make_response(
                RS.SYSTEM_ERROR, f"reply message properties[{PROPERTY_MESSAGE_REPLY_TO_CLIENT}]"
                " is null", ext), end_offset, now_ms)  # fmt: skip
        target = self._producer_conn(client_id)
        outbox = self.ctx.outbox
        if target is None or outbox is None:
            remark = f"push reply message fail, channel of <{client_id}> not found."
            log.warning(remark)
            return self._reply_stored(req.conn_id, cmd.make_response(RS.SYSTEM_ERROR, remark, ext),
                                      end_offset, now_ms)  # fmt: skip
        props[PROPERTY_PUSH_REPLY_TIME] = str(now_ms)
        peer = req.peer
        push = RemotingCommand.request(
            RC.PUSH_REPLY_MESSAGE_TO_CLIENT,
            ReplyMessageRequestHeader(
                h.producer_group, h.topic, h.default_topic, h.default_topic_queue_nums,
                h.queue_id, h.sys_flag, h.born_timestamp, h.flag,
                f"/{peer[0]}:{peer[1]}", f"/{self.bc.brokerIP1}:{self.bc.listenPort}", now_ms,
                properties_to_string(props), h.reconsume_times, bool(h.unit_mode),
            ).to_ext(),
            cmd.body,  # encode() joins the view: no copy here
        )  # fmt: skip
        if not cmd.is_oneway:
            self.push_waits[push.opaque] = _PushWait(
                req.conn_id, resp, client_id, target, now_ms + PUSH_REPLY_TIMEOUT_MS, end_offset
            )
        outbox.call(target, push)
        return None

    def _producer_conn(self, client_id: str) -> int | None:
        """ProducerManager.findChannel: the connection of a producer client by its id."""
        closed = self._closed_conns
        for conn_id in self.ctx.producer_channels.get(client_id, ()):
            if conn_id not in closed:
                return conn_id
        return None

    def on_client_response(self, resp: RemotingCommand, now_ms: int) -> None:
        """The requester answered a reply push: the replier learns how it went."""
        wait = self.push_waits.pop(resp.opaque, None)
        if wait is None:
            log.info("client response opaque=%d code=%d matches no push", resp.opaque, resp.code)
            return
        if resp.code != RS.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s",
                        wait.client_id, resp.remark)  # fmt: skip
            self._push_failed(wait, now_ms)
        else:
            self._send_reply_response(wait, now_ms)

    def _reply_stored(self, conn_id: int, resp: RemotingCommand, end_offset: int, now_ms: int
                      ) -> RemotingCommand | None:  # fmt: skip
        """The replier's answer once the stored reply is as durable as a WAIT send's
        (ReplyMessageProcessor's putMessage waits for the flush and the slave alike); None
        while it waits. end_offset 0: nothing was stored, nothing to wait for."""
        if not end_offset:
            return resp
        return self._maybe_wait(conn_id, False, resp, end_offset, True, now_ms, keep_code=True)

    def _send_reply_response(self, wait: _PushWait, now_ms: int) -> None:
        resp = self._reply_stored(wait.conn_id, wait.resp, wait.end_offset, now_ms)
        if resp is not None and self.ctx.outbox is not None:
            self.ctx.outbox.send(wait.conn_id, resp)

    def _push_failed(self, wait: _PushWait, now_ms: int) -> None:
        """Answer the replier SYSTEM_ERROR (the message stays stored, as in Java)."""
        wait.resp.code = RS.SYSTEM_ERROR
        wait.resp.remark = f"push reply message to {wait.client_id}fail."  # Java's text
        self._send_reply_response(wait, now_ms)

    def fail_pushes_to(self, conn_id: int, now_ms: int) -> None:
        """A requester gone while its reply push is open: that push failed."""
        for opaque in [o for o, w in self.push_waits.items() if w.target_conn == conn_id]:
            self._push_failed(self.push_waits.pop(opaque), now_ms)
        # client_manage's ProducerGroupChanged for it may come later: skip it until then
        closed = self._closed_conns
        closed.add(conn_id)
        if len(closed) > CACHE_LIMIT:
            live = {c for conns in self.ctx.producer_channels.values() for c in conns}
            closed.intersection_update(live)

    def expire_pushes(self, now_ms: int) -> int | None:
        """Fail the pushes whose answer is late; ms until the next deadline (None: none open)."""
        if not self.push_waits:
            return None
        for opaque in [o for o, w in self.push_waits.items() if now_ms >= w.deadline_ms]:
            self._push_failed(self.push_waits.pop(opaque), now_ms)
        if not self.push_waits:
            return None
        return min(w.deadline_ms for w in self.push_waits.values()) - now_ms
