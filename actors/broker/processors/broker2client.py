"""Admin requests the broker relays to a client and answers with the client's reply.

Mirrors broker/client/net/Broker2Client.java (callClient, getConsumeStatus) as
broker/processor/AdminBrokerProcessor.java uses it for GET_CONSUMER_RUNNING_INFO,
CONSUME_MESSAGE_DIRECTLY and INVOKE_BROKER_TO_GET_CONSUMER_STATUS, RocketMQ 4.9.x.
"""


from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from actors.broker.context import BrokerContext
from actors.core import Request
from protocol.bodies import (
    dumps_compact,
    dumps_object_map,
    loads_object_map,
)
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
)
from protocol.message import decode_offset_msg_id

log = logging.getLogger(__name__)


CALL_CLIENT_TIMEOUT_MS = 10_000  # Broker2Client.callClient
CONSUMER_STATUS_TIMEOUT_MS = 5_000  # Broker2Client.getConsumeStatus's invokeSync


@dataclass(slots=True)
class PendingCall:
    """An admin request relayed to a client (callClient), waiting for the client's answer."""

    conn_id: int  # who asked (an admin tool)
    cmd: RemotingCommand  # their request
    deadline_ms: int


@dataclass(slots=True)
class StatusCall:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GET_CONSUMER_STATUS_FROM_CLIENT asked of each
    client; their queue offset tables, by client id, once all answered or the time is up."""

    conn_id: int
    cmd: RemotingCommand
    deadline_ms: int
    pending: dict[int, str]  # opaque of our request -> the client's id
    tables: dict[str, bytes]  # client id -> its messageQueueTable (fastjson object-keyed map)



class Broker2Client:
    """AdminBrokerProcessor's calls to clients: owns the calls waiting for a client's answer."""

    def __init__(self, ctx: BrokerContext, store: Any) -> None:
        self.ctx = ctx
        self.store = store
        self.calls: dict[int, PendingCall] = {}  # opaque of our request to the client -> call
        self.status_calls: dict[int, StatusCall] = {}  # opaque of one client's request -> call

    def forget(self, conn_id: int) -> None:
        """The asker's connection closed: its calls are answered to no one."""
        for opaque in [o for o, c in self.calls.items() if c.conn_id == conn_id]:
            del self.calls[opaque]
        for opaque in [o for o, c in self.status_calls.items() if c.conn_id == conn_id]:
            del self.status_calls[opaque]

    def expire(self, now_ms: int) -> list[int]:
        """Answer the calls whose time is up (callConsumer's timeout; a status call with the
        clients that answered, as in Java); the deadlines still ahead."""
        for opaque in [o for o, c in self.calls.items() if now_ms >= c.deadline_ms]:
            call = self.calls.pop(opaque)
            ext = call.cmd.ext_fields or {}
            self._reply(call.conn_id, call.cmd.make_response(
                RS.CONSUME_MSG_TIMEOUT,
                f"consumer <{ext.get('consumerGroup', '')}> <{ext.get('clientId', '')}> Timeout: "
                f"the client did not answer code {call.cmd.code} in time"))
        for sc in {id(c): c for c in self.status_calls.values()}.values():
            if now_ms >= sc.deadline_ms:
                self._finish_status(sc)
        return [c.deadline_ms for c in self.calls.values()] + \
            [c.deadline_ms for c in self.status_calls.values()]  # fmt: skip

    def _reply(self, conn_id: int, resp: RemotingCommand) -> None:
        if self.ctx.outbox is not None:
            self.ctx.outbox.send(conn_id, resp)

    # --- requests relayed to a client (Broker2Client.callClient) -------------------------------

    def _client_conn(self, group: str, client_id: str | None) -> int | None:
        info = self.ctx.consumer_groups.get(group)
        if info is None:
            return None
        for cid, conn_id, _addr, _lang, _ver in info.connections:
            if cid == client_id:
                return conn_id
        return None

    def _relay(
        self, req: Request, group: str, client_id: str | None, fwd: RemotingCommand, now_ms: int
    ) -> RemotingCommand | None:
        """Broker2Client.callClient: send fwd to the group's client; its answer (see
        on_client_response) goes back to the asker, unless the asker sent a oneway request."""
        cmd = req.cmd
        conn_id = self._client_conn(group, client_id)
        if conn_id is None:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        if self.ctx.outbox is None:
            return cmd.make_response(RS.SYSTEM_ERROR, "no connection to the client")
        if not cmd.is_oneway:  # a oneway asker gets nothing back: the answer is dropped
            self.calls[fwd.opaque] = PendingCall(
                req.conn_id, cmd, now_ms + CALL_CLIENT_TIMEOUT_MS
            )
        self.ctx.outbox.call(conn_id, fwd)
        return None

    def on_client_response(self, resp: RemotingCommand, now_ms: int) -> None:
        """A client answered a relayed request: pass code, remark, ext fields and body on."""
        sc = self.status_calls.pop(resp.opaque, None)
        if sc is not None:
            self._status_answer(sc, resp)
            return
        call = self.calls.pop(resp.opaque, None)
        if call is None:
            log.info("client response opaque=%d code=%d matches no call", resp.opaque, resp.code)
            return
        self._reply(call.conn_id, call.cmd.make_response(
            resp.code, resp.remark, resp.ext_fields, resp.body))

    def consumer_running_info(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """GET_CONSUMER_RUNNING_INFO: ask the consumer itself (mqadmin consumerStatus)."""
        h = GetConsumerRunningInfoRequestHeader.from_ext(req.cmd.ext_fields)
        fwd = RemotingCommand.request(RC.GET_CONSUMER_RUNNING_INFO, h.to_ext())
        return self._relay(req, h.consumer_group, h.client_id, fwd, now_ms)

    def consumer_status(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (mqadmin getConsumerStatus,
        Broker2Client.getConsumeStatus): ask each client of the group (or only clientAddr,
        matched against the client id) for its queue offsets of the topic."""
        cmd = req.cmd
        h = GetConsumerStatusRequestHeader.from_ext(cmd.ext_fields)
        info = self.ctx.consumer_groups.get(h.group)
        if info is None or not info.connections:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{h.group}]")
        only = (h.client_addr or "").strip()
        targets = [(cid, conn) for cid, conn, _a, _l, _v in info.connections
                   if not only or cid == only][:1 if only else None]  # fmt: skip
        sc = StatusCall(req.conn_id, cmd, now_ms + CONSUMER_STATUS_TIMEOUT_MS, {}, {})
        if not targets or self.ctx.outbox is None:
            return self._status_response(sc)
        ext = GetConsumerStatusRequestHeader(h.topic, h.group).to_ext()
        for cid, conn in targets:
            fwd = RemotingCommand.request(RC.GET_CONSUMER_STATUS_FROM_CLIENT, ext)
            sc.pending[fwd.opaque] = cid
            self.status_calls[fwd.opaque] = sc
            self.ctx.outbox.call(conn, fwd)
        return None

    def _status_answer(self, sc: StatusCall, resp: RemotingCommand) -> None:
        cid = sc.pending.pop(resp.opaque, "")
        if resp.code == RS.SUCCESS and resp.body:
            try:
                text = bytes(resp.body).decode("utf-8")
                key = '"messageQueueTable":'
                at = text.find(key)
                pairs, _ = loads_object_map(text, at + len(key)) if at >= 0 else ([], 0)
                sc.tables[cid] = dumps_object_map(pairs)
            except (UnicodeDecodeError, ValueError, IndexError) as e:
                log.warning("consumer status of %s unreadable: %s", cid, e)
        if not sc.pending:
            self._finish_status(sc)

    def _finish_status(self, sc: StatusCall) -> None:
        for opaque in list(sc.pending):
            self.status_calls.pop(opaque, None)
        sc.pending.clear()
        self._reply(sc.conn_id, self._status_response(sc))

    def _status_response(self, sc: StatusCall) -> RemotingCommand:
        """GetConsumerStatusBody: consumerTable {clientId: {MessageQueue: offset}}."""
        table = b",".join(dumps_compact(c) + b":" + m for c, m in sorted(sc.tables.items()))
        body = b'{"consumerTable":{' + table + b'},"messageQueueTable":{}}'
        return sc.cmd.make_response(RS.SUCCESS, None, None, body)

    def consume_directly(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """CONSUME_MESSAGE_DIRECTLY: hand one stored message (by offset msg id) to a consumer."""
        cmd = req.cmd
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext(cmd.ext_fields)
        try:
            _host, _port, phy = decode_offset_msg_id(h.msg_id or "")
        except ValueError:
            return cmd.make_response(RS.SYSTEM_ERROR, f"bad message id {h.msg_id!r}")
        data = self.store.select_one_message_by_offset(phy)
        if data is None:
            return cmd.make_response(RS.SYSTEM_ERROR, f"no message at offset {phy}")
        h.broker_name = self.ctx.broker_config.brokerName  # the consumer builds its MQ from it
        fwd = RemotingCommand.request(RC.CONSUME_MESSAGE_DIRECTLY, h.to_ext(), bytes(data))
        return self._relay(req, h.consumer_group, h.client_id, fwd, now_ms)
