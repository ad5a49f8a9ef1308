"""Admission of TCP processor channels: a connection becomes a Channel once it sent the token.

Mirrors no RocketMQ class (RocketMQ hands requests to executors inside one JVM): across hosts a
processor channel is a TCP connection, so the broker's random token, sent first, keeps anyone
else who can reach the port from writing channel records.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import socket

from actors.runtime.channel import Channel, accept_all

log = logging.getLogger(__name__)


TOKEN_TIMEOUT_S = 0.5  # the connector writes the token right after connecting


class TokenGate:
    """Accepts TCP channel connections without waiting on any of them: each is held until its
    first bytes are the broker's token (then it becomes a Channel), or closed when they are not
    or when TOKEN_TIMEOUT_S passes first. The caller watches pending_fds() along with its
    channels and hands their readiness to ready()."""

    def __init__(self, token: bytes, name: str = "") -> None:
        self.token = token
        self.name = name
        self._pending: dict[int, tuple[socket.socket, bytearray, float]] = {}

    def pending_fds(self) -> list[int]:
        """Connections still owing their token."""
        return list(self._pending)

    def accept(self, listener: socket.socket, now: float) -> None:
        """Take every connection waiting on the listener into the pending set."""
        for sock in accept_all(listener):
            sock.setblocking(False)
            self._pending[sock.fileno()] = (sock, bytearray(), now + TOKEN_TIMEOUT_S)

    def ready(self, fd: int) -> Channel | None:
        """Read what a pending connection sent; its Channel once the whole token matched."""
        entry = self._pending.get(fd)
        if entry is None:
            return None
        sock, got, _deadline = entry
        need = len(self.token) - len(got)
        try:
            chunk = sock.recv(need)  # never past the token: what follows belongs to the channel
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            chunk = b""
        got += chunk
        if chunk and len(got) < len(self.token):
            return None
        del self._pending[fd]
        if not chunk or not hmac.compare_digest(bytes(got), self.token):
            log.warning("channel=%s: refused a connection without the channel token", self.name)
            sock.close()
            return None
        return Channel(sock, self.name)

    def expire(self, now: float) -> float | None:
        """Close connections whose token is late; seconds until the next deadline, or None."""
        for fd, (sock, _got, deadline) in list(self._pending.items()):
            if now >= deadline:
                log.warning("channel=%s: no channel token within %.1f s, closing", self.name,
                            TOKEN_TIMEOUT_S)  # fmt: skip
                del self._pending[fd]
                sock.close()
        if not self._pending:
            return None
        return max(0.0, min(d for _s, _g, d in self._pending.values()) - now)

    def close(self) -> None:
        """Close every pending connection."""
        for sock, _got, _deadline in self._pending.values():
            sock.close()
        self._pending.clear()


def channel_token() -> bytes:
    """A fresh random token for a broker's TCP channels."""
    return secrets.token_bytes(32)

