"""The query group: QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).

Mirrors broker/processor/QueryMessageProcessor.java, RocketMQ 4.9.x (spec §3.2, §9.8).
"""

from __future__ import annotations

import logging

from actors.broker.context import BrokerContext
from actors.core import CodeDispatchCore, Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)

log = logging.getLogger(__name__)


class QueryMessageProcessor(CodeDispatchCore):
    """The query core (ProcessorCore)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.handlers = {RC.QUERY_MESSAGE: self._query, RC.VIEW_MESSAGE_BY_ID: self._view}

    def _query(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        h = QueryMessageRequestHeader.from_ext(cmd.ext_fields)
        max_num = h.max_num
        if h.unique_key_query:
            max_num = self.ctx.broker_config.defaultQueryMaxNum
        result = self.store.query_message(
            h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp
        )
        out_ext = QueryMessageResponseHeader(
            result.index_last_update_timestamp, result.index_last_update_phyoffset
        ).to_ext()
        body = result.buffer  # the matching records concatenated
        if not body:
            return cmd.make_response(
                RS.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", out_ext
            )
        return cmd.make_response(RS.SUCCESS, None, out_ext, body)

    def _view(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        offset = ViewMessageRequestHeader.from_ext(cmd.ext_fields).offset
        data = self.store.select_one_message_by_offset(offset)
        if not data:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return cmd.make_response(RS.SUCCESS, None, None, bytes(data))
