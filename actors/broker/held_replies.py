"""Replies held until every name server has the broker's registration made after the change.

Mirrors the synchronous registration of broker/BrokerController.java, RocketMQ 4.9.x:
registerIncrementBrokerData (UPDATE_AND_CREATE_TOPIC) and registerBrokerAll (UPDATE_BROKER_CONFIG
of brokerPermission) return only once BrokerOuterAPI.registerBrokerAll has every name server's
answer, or registerBrokerTimeoutMills has passed. Here a core emits its event with the token
`hold` returns; the controller registers, waits for the answers, and sends the token back
(ReleaseBarrier -> the core's release); `expire` answers what waited too long. A delete is held
the same way (actors.broker.processors.admin_store), so that a registration which still named the
topic has reached every name server before the client can go on to DELETE_TOPIC_IN_NAMESRV.
A heartbeat that created a group's %RETRY% topic (ClientManageProcessor.heartBeat's
createTopicInSendMessageBackMethod, which registers before the consumer is registered) holds its
NOTIFY_CONSUMER_IDS_CHANGED requests with its reply (`before`), so the consumers it wakes find the
retry topic's route at the name servers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from actors.core import Outbox
from protocol.command import RemotingCommand

log = logging.getLogger(__name__)


@dataclass(slots=True)
class HeldReply:
    """A reply (and the requests to send before it) waiting for the registration."""

    sends: list[tuple[int, RemotingCommand]]  # (connection, command), sent in this order
    deadline_ms: int


class HeldReplies:
    """One core's held replies by token (tokens are unique within the core)."""

    def __init__(self, outbox: Outbox | None, timeout_ms: int) -> None:
        self.outbox = outbox
        self.timeout_ms = timeout_ms  # registerBrokerTimeoutMills
        self.held: dict[int, HeldReply] = {}
        self._next_token = 1

    def hold(self, conn_id: int, resp: RemotingCommand, now_ms: int, *,
             before: Sequence[tuple[int, RemotingCommand]] = ()) -> int:  # fmt: skip
        """Keep `resp` for the connection, after the (connection, command) pairs of `before`,
        until release(token) or the timeout; the token."""
        token = self._next_token
        self._next_token += 1
        self.held[token] = HeldReply([*before, (conn_id, resp)], now_ms + self.timeout_ms)
        return token

    def release(self, token: int) -> bool:
        """The registration is done: send what is held under `token` (False if gone)."""
        held = self.held.pop(token, None)
        if held is None:
            return False
        if self.outbox is not None:
            for conn_id, cmd in held.sends:
                self.outbox.send(conn_id, cmd)
        return True

    def expire(self, now_ms: int) -> int | None:
        """Answer what waited past its deadline; ms until the next deadline (None: none)."""
        for token in [t for t, h in self.held.items() if now_ms >= h.deadline_ms]:
            log.warning("name server registration not confirmed in time; replying token=%d", token)
            self.release(token)
        if not self.held:
            return None
        return max(0, min(h.deadline_ms for h in self.held.values()) - now_ms)

    def forget(self, conn_id: int) -> None:
        """The connection closed: what is held for it goes nowhere (the rest stays held)."""
        for token, h in list(self.held.items()):
            h.sends = [s for s in h.sends if s[0] != conn_id]
            if not h.sends:
                del self.held[token]
