"""Thespian's TCP transport, authenticated: nothing from a peer is unpickled before it proves it
holds this process tree's key.

Mirrors nothing in RocketMQ (a JVM broker has no inter-process transport). Thespian's
multiprocTCPBase gives the admin and every actor a TCP port and unpickles whatever a peer sends
to it (thespian/system/transport/TCPTransport.py: the module global `serializer` is `pickle`;
each packet is `b"<len>>" + serializer.dumps((sender, message))` and the receiving side calls
`serializer.loads` on it, through streamBuffer.ReceiveBuffer). On loopback that still lets any
local user run code as the broker's (or a client application's) user with one packet.

`install()` replaces that module global with `AuthenticatedPickle`: every packet this process
sends is `HMAC-SHA256(key, pickle) + pickle`, and a packet received is unpickled only when its tag
verifies under the same key (`hmac.compare_digest`). The key is 32 random bytes made in the
process that starts the actor system, before it starts; it exists only in memory. The admin and
every actor are forked from that process (Process Startup Method 'fork') and inherit the key
with the patch, so they talk to each other as before, while a process outside the tree (another
user, or another run of ours) cannot produce a packet any of them accepts. Nothing is written to
disk, so there is no key file for another user to read.

Thespian's two acknowledgement packets ('ACK', 'ACK+DATAERR') are pre-pickled constants sent
bare (streamBuffer.ackMsg / ackDataErrMsg); they are recognised by their exact bytes, never
unpickled. A packet that does not verify is answered as Thespian answers an undecodable one (it
is turned into 'ACK+DATAERR': the receiver refuses it, acknowledges with a data error and closes
the connection; a sender waiting for an acknowledgement counts it as a bad packet), and a
warning is logged at most once every REFUSAL_LOG_INTERVAL_S.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import logging
import pickle
import secrets
import threading
import time
from typing import Any, Final

log = logging.getLogger(__name__)

TAG_BYTES: Final = 32  # HMAC-SHA256
KEY_BYTES: Final = 32
REFUSAL_LOG_INTERVAL_S: Final = 10.0

# what Thespian's streamBuffer pickles once at import and sends bare
ACK: Final = "ACK"
ACK_DATA_ERROR: Final = "ACK+DATAERR"


class AuthenticatedPickle:
    """A drop-in for the `pickle` module in Thespian's TCP transport: dumps() tags, loads()
    verifies the tag before it unpickles."""

    def __init__(self, key: bytes) -> None:
        if len(key) < KEY_BYTES:
            raise ValueError(f"the transport key must be at least {KEY_BYTES} bytes")
        self._key = key
        self._controls = {pickle.dumps(ACK): ACK, pickle.dumps(ACK_DATA_ERROR): ACK_DATA_ERROR}
        self._mu = threading.Lock()
        self.refused = 0  # packets refused since install (read by the log line)
        self._last_log = -REFUSAL_LOG_INTERVAL_S

    def tag(self, data: bytes | memoryview) -> bytes:
        """The HMAC a packet carrying `data` starts with."""
        return hmac.new(self._key, data, hashlib.sha256).digest()

    def dumps(self, obj: Any) -> bytes:
        """Pickle `obj` and put the key's tag in front of it."""
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        return self.tag(data) + data

    def loads(self, packet: bytes) -> Any:
        """Unpickle a verified packet; an acknowledgement by its bytes; anything else becomes
        Thespian's data-error acknowledgement (refused, never unpickled)."""
        control = self._controls.get(bytes(packet)) if len(packet) < 64 else None
        if control is not None:
            return control
        view = memoryview(packet)
        if len(view) > TAG_BYTES and hmac.compare_digest(view[:TAG_BYTES],
                                                         self.tag(view[TAG_BYTES:])):  # fmt: skip
            return pickle.loads(view[TAG_BYTES:])
        self._refuse(len(view))
        return ACK_DATA_ERROR

    def _refuse(self, size: int) -> None:
        with self._mu:
            self.refused += 1
            now = time.monotonic()
            if now - self._last_log < REFUSAL_LOG_INTERVAL_S:
                return
            self._last_log = now
            count = self.refused
        log.warning("refused a Thespian packet of %d bytes that does not carry this actor "
                    "system's key (a peer outside it: %d refused so far); nothing unpickled",
                    size, count)  # fmt: skip


_installed: AuthenticatedPickle | None = None


def install() -> AuthenticatedPickle:
    """Authenticate Thespian's TCP transport in this process (and in every process forked from
    it later); idempotent. Call it before the actor system starts."""
    global _installed
    transport = importlib.import_module("thespian.system.transport.TCPTransport")
    if _installed is None:
        _installed = AuthenticatedPickle(secrets.token_bytes(KEY_BYTES))
    setattr(transport, "serializer", _installed)  # noqa: B010  # a module global of theirs
    return _installed


def installed() -> AuthenticatedPickle | None:
    """The serializer install() put in place (None before)."""
    return _installed
