"""The consumer_manage group: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
GET_CONSUMER_LIST_BY_GROUP (38).

Mirrors broker/processor/ConsumerManageProcessor.java, RocketMQ 4.9.x (spec §9.5). Offsets
are the broker's shared table (actors/broker/offsets.py); consumer groups are replicas kept
current by events.
"""

from __future__ import annotations

import logging

from actors.broker.context import BrokerContext
from actors.core import CodeDispatchCore, Request
from protocol.bodies import GetConsumerListByGroupResponseBody
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)

log = logging.getLogger(__name__)


class ConsumerManageProcessor(CodeDispatchCore):
    """The consumer_manage core (ProcessorCore)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.handlers = {
            RC.QUERY_CONSUMER_OFFSET: self._query_offset,
            RC.UPDATE_CONSUMER_OFFSET: self._update_offset,
            RC.GET_CONSUMER_LIST_BY_GROUP: self._consumer_list,
        }

    def _query_offset(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        h = QueryConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        offset = self.ctx.offsets.query_offset(h.consumer_group, h.topic, h.queue_id)
        if offset < 0:
            min_offset = -1
            in_disk = False
            store = self.store
            if store is not None:
                min_offset = int(store.get_min_offset_in_queue(h.topic, h.queue_id))
                # checkInDiskByConsumeOffset: no unit at queue offset 0 counts as not on disk
                if min_offset <= 0 and store.get_max_offset_in_queue(h.topic, h.queue_id) > 0:
                    phy = store.get_commit_log_offset_in_queue(h.topic, h.queue_id, 0)
                    in_disk = bool(
                        phy is not None and phy >= 0 and store.check_in_disk_by_commit_offset(phy)
                    )
            if min_offset > 0 or in_disk:
                return cmd.make_response(
                    RS.QUERY_NOT_FOUND,
                    "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                )
            offset = 0
        return cmd.make_response(
            RS.SUCCESS, None, QueryConsumerOffsetResponseHeader(offset).to_ext()
        )

    def _update_offset(self, req: Request, now_ms: int) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext(req.cmd.ext_fields)
        self.ctx.offsets.commit_offset(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return req.cmd.make_response(RS.SUCCESS, None, {})

    def _consumer_list(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        group = GetConsumerListByGroupRequestHeader.from_ext(cmd.ext_fields).consumer_group
        info = self.ctx.consumer_groups.get(group)
        if info is None or not info.client_ids:
            log.warning("getConsumerListByGroup: no consumer group=%s", group)
            return cmd.make_response(RS.SYSTEM_ERROR, f"no consumer for this group, {group}")
        body = GetConsumerListByGroupResponseBody(list(info.client_ids)).to_json()
        return cmd.make_response(RS.SUCCESS, None, None, body)
