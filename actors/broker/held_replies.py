"""Replies held until every name server has the broker's registration made after the change.

Mirrors the synchronous registration of broker/BrokerController.java, RocketMQ 4.9.x:
registerIncrementBrokerData (UPDATE_AND_CREATE_TOPIC) and registerBrokerAll (UPDATE_BROKER_CONFIG
of brokerPermission) return only once BrokerOuterAPI.registerBrokerAll has every name server's
answer, or registerBrokerTimeoutMills has passed. Here a core emits its event with the token
`hold` returns; the controller registers, waits for the answers, and sends the token back
(ReleaseBarrier -> the core's release); `expire` answers what waited too long. A delete is held
the same way (actors.broker.processors.admin_store), so that a registration which still named the
topic has reached every name server before the client can go on to DELETE_TOPIC_IN_NAMESRV.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from actors.core import Outbox
from protocol.command import RemotingCommand

log = logging.getLogger(__name__)


@dataclass(slots=True)
class HeldReply:
    """A reply waiting for the registration."""

    conn_id: int
    resp: RemotingCommand
    deadline_ms: int


class HeldReplies:
    """One core's held replies by token (tokens are unique within the core)."""

    def __init__(self, outbox: Outbox | None, timeout_ms: int) -> None:
        self.outbox = outbox
        self.timeout_ms = timeout_ms  # registerBrokerTimeoutMills
        self.held: dict[int, HeldReply] = {}
        self._next_token = 1

    def hold(self, conn_id: int, resp: RemotingCommand, now_ms: int) -> int:
        """Keep `resp` for the connection until release(token) or the timeout; the token."""
        token = self._next_token
        self._next_token += 1
        self.held[token] = HeldReply(conn_id, resp, now_ms + self.timeout_ms)
        return token

    def release(self, token: int) -> bool:
        """The registration is done: send the reply held under `token` (False if gone)."""
        held = self.held.pop(token, None)
        if held is None:
            return False
        if self.outbox is not None:
            self.outbox.send(held.conn_id, held.resp)
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
        """The connection closed: its held replies go nowhere."""
        for token in [t for t, h in self.held.items() if h.conn_id == conn_id]:
            del self.held[token]
