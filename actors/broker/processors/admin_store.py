"""The admin requests that change the message store, served by its one writer (the send group):
DELETE_TOPIC_IN_BROKER (215), CLEAN_UNUSED_TOPIC (316), CLEAN_EXPIRED_CONSUMEQUEUE (306) and
DELETE_EXPIRED_COMMITLOG (329).

Mirrors the store-changing part of broker/processor/AdminBrokerProcessor.java (deleteTopic,
cleanUnusedTopic, cleanExpiredConsumeQueue, deleteExpiredCommitLog), RocketMQ 4.9.x, where the
processor changes the store before it answers. Here the send actor is the only process that may
change the store, and serving these codes there keeps them in order with the sends: a send that
reaches the writer after a delete (pipelined behind it on one connection, or on any connection
once the delete is answered) finds the topic gone with its queues, so it makes the topic anew
from queue offset 0 (autoCreateTopicEnable) or is refused, and never lands in a queue the delete
is about to drop. Every reader process sees the queues gone before the delete is answered (the
writer bumps the store's file generation). The delete's reply is then held until the name
servers have a registration without the topic (held_replies): a registration still naming it
cannot reach them after the client's DELETE_TOPIC_IN_NAMESRV.
"""

from __future__ import annotations

import logging
from typing import Final

from actors.broker.context import BrokerContext
from actors.broker.events import TopicsDeleted
from actors.broker.held_replies import HeldReplies
from actors.broker.topic_config import validate_topic
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.codes import is_system_topic
from protocol.command import RemotingCommand
from protocol.headers import DeleteTopicRequestHeader

log = logging.getLogger(__name__)

STORE_ADMIN_CODES: Final = frozenset({
    int(RC.DELETE_TOPIC_IN_BROKER), int(RC.CLEAN_UNUSED_TOPIC),
    int(RC.CLEAN_EXPIRED_CONSUMEQUEUE), int(RC.DELETE_EXPIRED_COMMITLOG),
})  # fmt: skip
SLAVE_REFUSED: Final = ("Can't modify topic or subscription group from slave broker, "
                        "please execute it from master broker.")  # fmt: skip


class StoreAdminProcessor:
    """The codes above, on the writer's store (hosted by the send core)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.held = HeldReplies(ctx.outbox, ctx.broker_config.registerBrokerTimeoutMills)

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Serve one request (None: the reply is held, or the request was oneway)."""
        code = req.cmd.code
        if code == RC.DELETE_TOPIC_IN_BROKER:
            return self._delete_topic(req, now_ms)
        if code == RC.CLEAN_UNUSED_TOPIC:
            self._clean_unused_topics()
        elif code == RC.CLEAN_EXPIRED_CONSUMEQUEUE:
            n = self.store.clean_expired_consume_queues()
            log.info("clean expired consume queues: %d deleted", n)
        elif code == RC.DELETE_EXPIRED_COMMITLOG:
            self.store.execute_delete_files_manually()
            n = self.store.clean_expired(now_ms)
            log.info("delete expired commit log (manual): %d files deleted now", n)
        return req.cmd.make_response(RS.SUCCESS)

    def _delete_topic(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """deleteTopic: the config (every replica and the controller, through the event), the
        consume queues and the consumer offsets go before the reply; the reply waits for the
        registration without the topic."""
        cmd = req.cmd
        if self.ctx.broker_config.is_slave:
            return cmd.make_response(RS.SYSTEM_ERROR, SLAVE_REFUSED)
        topic = DeleteTopicRequestHeader.from_ext(cmd.ext_fields).topic
        bad = validate_topic(topic)
        if bad is not None:
            return cmd.make_response(RS.SYSTEM_ERROR, bad)
        if is_system_topic(topic):
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        self.store.delete_topics([topic])
        log.info("deleted topic %s with its consume queues", topic)
        resp = cmd.make_response(RS.SUCCESS, None, {})
        if not self.ctx.registration_barrier or cmd.is_oneway:
            self.ctx.emit(TopicsDeleted((topic,)))
            return resp
        token = self.held.hold(req.conn_id, resp, now_ms)
        self.ctx.emit(TopicsDeleted((topic,), barrier=token))
        return None

    def _clean_unused_topics(self) -> None:
        """cleanUnusedTopic: the queues of topics no longer configured (system topics stay)."""
        configured = self.ctx.topics.table
        unused = {topic for topic, _qid in self.store.consume_queues
                  if topic not in configured and not is_system_topic(topic)}  # fmt: skip
        if unused:
            self.store.delete_topics(unused)
        log.info("clean unused topics: deleted the consume queues of %s", sorted(unused))

    def release(self, token: int) -> bool:
        """The controller registered after the delete under `token`: answer it."""
        return self.held.release(token)

    def tick(self, now_ms: int) -> int | None:
        """Answer deletes whose registration was not confirmed in time."""
        return self.held.expire(now_ms)

    def on_connection_closed(self, conn_id: int) -> None:
        """Held replies for a closed connection go nowhere."""
        self.held.forget(conn_id)
