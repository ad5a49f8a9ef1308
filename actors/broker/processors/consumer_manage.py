"""The consumer_manage group: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
GET_CONSUMER_LIST_BY_GROUP (38).

Mirrors broker/processor/ConsumerManageProcessor.java, RocketMQ 4.9.x (spec §9.5). Offsets
and consumer groups are replicas kept current by events.
"""

from __future__ import annotations

import json
import logging

from actors.broker.context import BrokerContext
from actors.broker.events import OffsetCommitted
from actors.broker.fields import req_int, req_str
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError

log = logging.getLogger(__name__)


class ConsumerManageProcessor:
    """The consumer_manage core (ProcessorCore)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Dispatch on the request code."""
        cmd = req.cmd
        try:
            if cmd.code == RC.QUERY_CONSUMER_OFFSET:
                resp = self._query_offset(cmd)
            elif cmd.code == RC.UPDATE_CONSUMER_OFFSET:
                resp = self._update_offset(cmd)
            elif cmd.code == RC.GET_CONSUMER_LIST_BY_GROUP:
                resp = self._consumer_list(cmd)
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

    def _query_offset(self, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        group = req_str(ext, "consumerGroup")
        topic = req_str(ext, "topic")
        queue_id = req_int(ext, "queueId")
        offset = self.ctx.offsets.query_offset(group, topic, queue_id)
        if offset >= 0:
            return cmd.make_response(RS.SUCCESS, None, {"offset": str(offset)})
        min_offset = -1
        in_disk = False
        if self.store is not None:
            min_offset = int(self.store.get_min_offset_in_queue(topic, queue_id))
            if min_offset <= 0:
                phy = self.store.get_commit_log_offset_in_queue(topic, queue_id, 0)
                in_disk = bool(
                    phy is not None and phy >= 0 and self.store.check_in_disk_by_commit_offset(phy)
                )
        if min_offset <= 0 and not in_disk:
            return cmd.make_response(RS.SUCCESS, None, {"offset": "0"})
        return cmd.make_response(
            RS.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
        )

    def _update_offset(self, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        self.ctx.emit(
            OffsetCommitted(
                req_str(ext, "consumerGroup"),
                req_str(ext, "topic"),
                req_int(ext, "queueId"),
                req_int(ext, "commitOffset"),
            )
        )
        return cmd.make_response(RS.SUCCESS, None, {})

    def _consumer_list(self, cmd: RemotingCommand) -> RemotingCommand:
        group = req_str(cmd.ext_fields, "consumerGroup")
        info = self.ctx.consumer_groups.get(group)
        if info is None or not info.client_ids:
            log.warning("getConsumerListByGroup: no consumer group=%s", group)
            return cmd.make_response(RS.SYSTEM_ERROR, f"no consumer for this group, {group}")
        body = json.dumps({"consumerIdList": list(info.client_ids)}, separators=(",", ":")).encode()
        return cmd.make_response(RS.SUCCESS, None, None, body)
