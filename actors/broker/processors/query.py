"""The query group: QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).

Mirrors broker/processor/QueryMessageProcessor.java, RocketMQ 4.9.x (spec §3.2, §9.8).
"""

from __future__ import annotations

import logging

from actors.broker.context import BrokerContext
from actors.broker.fields import opt_bool, req_int, req_str
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError

log = logging.getLogger(__name__)

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


class QueryMessageProcessor:
    """The query core (ProcessorCore)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Dispatch on the request code."""
        cmd = req.cmd
        try:
            if cmd.code == RC.QUERY_MESSAGE:
                resp = self._query(cmd)
            elif cmd.code == RC.VIEW_MESSAGE_BY_ID:
                resp = self._view(cmd)
            else:
                resp = cmd.make_response(
                    RS.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
                )
        except HeaderFieldError as e:
            resp = cmd.make_response(e.code, e.remark)
        return None if cmd.is_oneway else resp

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Nothing per connection."""

    def tick(self, now_ms: int) -> int | None:
        """No timers."""
        return None

    def _query(self, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        topic = req_str(ext, "topic")
        key = req_str(ext, "key")
        max_num = req_int(ext, "maxNum")
        begin = req_int(ext, "beginTimestamp")
        end = req_int(ext, "endTimestamp")
        if opt_bool(ext, UNIQUE_KEY_QUERY):
            max_num = self.ctx.broker_config.defaultQueryMaxNum
        result = self.store.query_message(topic, key, max_num, begin, end)
        out_ext = {
            "indexLastUpdateTimestamp": str(getattr(result, "index_last_update_timestamp", 0)),
            "indexLastUpdatePhyoffset": str(getattr(result, "index_last_update_phyoffset", 0)),
        }
        body = _result_body(result)
        if not body:
            return cmd.make_response(
                RS.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", out_ext
            )
        return cmd.make_response(RS.SUCCESS, None, out_ext, body)

    def _view(self, cmd: RemotingCommand) -> RemotingCommand:
        offset = req_int(cmd.ext_fields, "offset")
        data = self.store.select_one_message_by_offset(offset)
        if not data:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return cmd.make_response(RS.SUCCESS, None, None, bytes(data))


def _result_body(result: object) -> bytes:
    """The concatenated stored records of a QueryMessageResult."""
    buf = getattr(result, "buffer", None)
    if buf:
        return bytes(buf)
    parts = getattr(result, "message_buffers", None) or getattr(result, "buffers", None)
    if parts:
        return b"".join(bytes(p) for p in parts)
    return b""
