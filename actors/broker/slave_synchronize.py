"""A slave broker's sync connection to its master: topics, offsets, delay offsets, groups.

Mirrors broker/slave/SlaveSynchronize.java (syncAll every 10 s: GET_ALL_TOPIC_CONFIG,
GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET, GET_ALL_SUBSCRIPTIONGROUP_CONFIG), RocketMQ
4.9.x. Plain connection bookkeeping: the controller actor watches `fd()`, sends a round with
`request` and hands each answer's state events (from the controller core) on (`read`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from actors.runtime.client_conn import ClientConn
from actors.runtime.tls import TlsConfig
from protocol.command import RemotingCommand

log = logging.getLogger(__name__)


class SlaveSynchronize:
    """One connection to the master and the sync requests it has not answered yet."""

    def __init__(self, unwatch: Callable[[int], None]) -> None:
        self.unwatch = unwatch  # the owner's watch on a descriptor, dropped before a close
        self.tls: TlsConfig | None = None  # the broker's tls.enable: TLS to the master
        self.conn: ClientConn | None = None
        self.master = ""
        self.pending: dict[int, int] = {}  # opaque -> request code

    def fd(self) -> int | None:
        """The open connection's descriptor to watch (None: none open)."""
        conn = self.conn
        return conn.fd if conn is not None and not conn.closed else None

    def request(self, master: str, codes: Iterable[int]) -> bool:
        """Send one round of sync requests to `master` (connecting again when it changed or
        the connection closed); False when nothing was sent."""
        conn = self.conn
        if conn is None or conn.closed or self.master != master:
            self.close()
            try:
                conn = ClientConn.to(master, self.tls)
            except (OSError, ValueError) as exc:
                log.warning("master %s unreachable: %s", master, exc)
                return False
            self.conn, self.master = conn, master
            self.pending.clear()
        if self.pending:  # the last round is still unanswered: no second one on top
            log.warning("master %s has not answered the last sync: skipping this one", master)
            self.pending.clear()  # answers still to come are ignored; resend next time
            return False
        for code in codes:
            cmd = RemotingCommand.request(code)
            self.pending[cmd.opaque] = int(code)
            conn.write(cmd.encode())
        conn.flush()
        return True

    def read(self, events_of: Callable[[int, bytes], list[Any]],
             on_events: Callable[[list[Any]], None]) -> bool:  # fmt: skip
        """Read the master's answers, each one's events (events_of(code, body): the controller
        core's slave_sync_events) handed to on_events in order; False when the master closed
        the connection."""
        conn = self.conn
        if conn is None:
            return True
        frames = conn.read_frames()
        if frames is None:
            log.info("master %s closed the sync connection", self.master)
            self.close()
            return False
        for frame in frames:
            try:
                resp = RemotingCommand.decode(frame)
            except Exception as exc:
                log.warning("bad frame from master %s: %s", self.master, exc)
                continue
            code = self.pending.pop(resp.opaque, None)
            if code is None:
                continue
            if resp.code != 0:
                log.warning("master %s answered code=%d to %d: %s", self.master, resp.code, code,
                            resp.remark)  # fmt: skip
                continue
            try:
                events = events_of(code, bytes(resp.body or b""))
            except Exception:
                log.exception("slave sync of code %d failed", code)
                continue
            if events:
                on_events(events)
        return True

    def close(self) -> None:
        """Drop the connection (unwatched first: a child forked since may hold it too)."""
        conn = self.conn
        if conn is not None:
            self.unwatch(conn.fd)
            conn.close()
            self.conn = None
