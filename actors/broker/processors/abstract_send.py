"""What the send codes share: msgCheck and the retry / dead letter redirect.

Mirrors broker/processor/AbstractSendMessageProcessor.java (msgCheck: broker and topic
permission, topic name, auto-creation, queue id; the born host), and the handleRetryAndDLQ step
of SendMessageProcessor.java, RocketMQ 4.9.x. SendMessageProcessor (actors.broker.processors
.send) is built on it.
"""

from __future__ import annotations

import logging
import random
from typing import Final

from actors.broker.context import BrokerContext
from actors.broker.events import SubscriptionGroupChanged, TopicConfigChanged
from actors.broker.topic_config import (
    PERM_READ,
    PERM_WRITE,
    TopicConfig,
    is_not_allowed_send_topic,
    validate_topic,
)
from actors.core import FAQ_SUFFIX
from protocol.codes import RETRY_GROUP_TOPIC_PREFIX, dlq_topic
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import SendMessageRequestHeader, decode_send_header
from protocol.record import pack_host

log = logging.getLogger(__name__)

V3_4_9: Final = 121  # MQVersion ordinal from which a send carries maxReconsumeTimes
RW: Final = PERM_READ | PERM_WRITE

CACHE_LIMIT: Final = 10_000  # entries in each per-core lookup cache before it is reset


class _Reject(Exception):
    """An early error response."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class AbstractSendMessageProcessor:
    """The checks every send code runs before it touches the store."""

    broker_writable: bool  # set by the subclass from brokerPermission (and on its changes)

    def __init__(self, ctx: BrokerContext, rng: random.Random | None = None) -> None:
        self.ctx = ctx
        self.bc = ctx.broker_config
        self.rng = rng or random.Random()
        self._hosts: dict[tuple[str, int], bytes] = {}  # peer -> packed bornHost
        self._checked: dict[str, tuple[int, str] | None] = {}  # topic -> name check verdict

    # --- checks (AbstractSendMessageProcessor.msgCheck) --------------------------------------

    def _emit_topic(self, tc: TopicConfig) -> None:
        self.ctx.emit(TopicConfigChanged(tc, register=True))

    def _born_host(self, peer: tuple[str, int]) -> bytes:
        host = self._hosts.get(peer)
        if host is None:
            if len(self._hosts) >= CACHE_LIMIT:
                self._hosts.clear()
            host = self._hosts[peer] = pack_host(peer[0], peer[1])
        return host

    def _check_name(self, topic: str) -> tuple[int, str] | None:
        """TopicValidator checks, cached per topic name: None or (code, remark)."""
        try:
            return self._checked[topic]
        except KeyError:
            pass
        verdict: tuple[int, str] | None = None
        bad = validate_topic(topic)
        if bad is not None:
            verdict = (RS.SYSTEM_ERROR, bad)
        elif is_not_allowed_send_topic(topic):
            verdict = (RS.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        if len(self._checked) >= CACHE_LIMIT:
            self._checked.clear()
        self._checked[topic] = verdict
        return verdict

    def _msg_check(
        self, cmd: RemotingCommand, topic: str, queue_id: int, peer: tuple[str, int]
    ) -> tuple[TopicConfig, int]:
        """msgCheck: broker/topic permission, topic name, auto-create, queue id."""
        topics = self.ctx.topics
        tc = topics.table.get(topic)
        if not self.broker_writable and tc is not None and tc.order:
            raise _Reject(
                RS.NO_PERMISSION, f"the broker[{self.bc.brokerIP1}] sending message is forbidden"
            )
        verdict = self._check_name(topic)
        if verdict is not None:
            raise _Reject(*verdict)
        if tc is None:
            h = decode_send_header(cmd.code, cmd.ext_fields)
            tc = topics.create_in_send_message_method(
                topic, h.default_topic, h.default_topic_queue_nums, 0
            )
            if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc, _ = topics.create_in_send_back(topic, 1, RW, 0)
            if tc is None:
                raise _Reject(
                    RS.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!{FAQ_SUFFIX}",
                )
            self._emit_topic(tc)
        if queue_id < 0:
            queue_id = self.rng.randrange(max(1, tc.write_queue_nums))
        elif queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums:
            raise _Reject(
                RS.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {tc} Producer: {peer[0]}:{peer[1]}",
            )
        return tc, queue_id

    def _retry_dlq(
        self,
        h: SendMessageRequestHeader,
        version: int,
        topic: str,
        queue_id: int,
        props: dict[str, str],
    ) -> tuple[str, int]:
        """handleRetryAndDLQ: redirect a %RETRY% send past max reconsume times to %DLQ%.

        The request's DELAY stays: 4.9.x sets delay level 0 on the message before the request's
        properties replace its map, so a client's fallback send-back (DELAY 3 + reconsume times)
        reaches the dead letter queue through SCHEDULE_TOPIC_XXXX after that delay."""
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        cfg, created = self.ctx.groups.find_or_create(group)
        if cfg is None:
            raise _Reject(RS.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        if created:
            self.ctx.emit(SubscriptionGroupChanged(cfg))
        max_times = cfg.retry_max_times
        if version >= V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        if (h.reconsume_times or 0) >= max_times:
            dlq = dlq_topic(group)
            tc, created = self.ctx.topics.create_in_send_back(dlq, 1, RW)
            if created:
                self._emit_topic(tc)
            log.info("send to DLQ topic=%s reconsume=%s max=%d", dlq, h.reconsume_times, max_times)
            return dlq, 0
        return topic, queue_id

