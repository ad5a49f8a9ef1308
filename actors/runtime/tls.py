"""TLS on the client-facing connections: settings, SSL contexts and one connection's session.

Mirrors remoting/netty/TlsSystemConfig.java, TlsHelper.java and NettyRemotingServer's
HandshakeHandler, RocketMQ 4.9.x:
- the settings by their Java names (`tls.server.mode`, `tls.enable`, `tls.test.mode.enable`,
  `tls.server.*`, `tls.client.*`), taken from broker.conf / namesrv.properties (Java takes
  them from -D system properties), then overridden by the properties file `tls.config.file`
  (default /etc/rocketmq/tls.properties, read when it exists) for every key but the mode,
  `tls.enable` and the file's own name, as TlsHelper.extractTlsConfigFromFile does;
- `tls.server.mode`: disabled (a TLS hello is closed), permissive (the first byte decides:
  0x16, a TLS handshake record, starts TLS, anything else is plain RocketMQ; the default, as in
  Java) or enforcing (a plain connection is closed);
- test mode (`tls.test.mode.enable`, default true as in Java): the server makes a self-signed
  certificate (the `openssl` command, once per process, on the first TLS connection) and a
  client trusts any server;
- otherwise the server presents `tls.server.certPath` / `keyPath` (`keyPassword` for an
  encrypted key), asks for client certificates per `tls.server.need.client.auth` (none,
  optional, require) and checks them against `tls.server.trustCertPath` when
  `tls.server.authClient` is true; a client presents `tls.client.certPath` / `keyPath` and
  checks the server against `tls.client.trustCertPath` when `tls.client.authServer` is true.
  Neither side checks host names (Netty's handlers do not).
One difference: with `tls.server.authClient=false` Java requests a client certificate and
trusts any; Python's ssl cannot trust an unknown certificate, so ours then does not request
one (a client certificate is only worth asking for when it is checked).

A connection's TLS runs over memory BIOs (ssl.SSLObject): the socket stays a plain
non-blocking socket in its owner's poll set, ciphertext is read and written as before, and
TlsSession turns it into plaintext and back. A session is locked: a client connection is read
and written from different threads.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

log = logging.getLogger(__name__)

TLS_HANDSHAKE: Final = 0x16  # the first byte of a TLS handshake record (a ClientHello)
DEFAULT_CONFIG_FILE: Final = "/etc/rocketmq/tls.properties"
READ_CHUNK: Final = 256 * 1024
CERT_DAYS: Final = 3650
REFUSAL_LOG_S: Final = 10.0


class TlsError(Exception):
    """A TLS session failed (bad handshake, refused certificate): the connection closes."""


class TlsMode(enum.Enum):
    """common/TlsMode.java."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


_KEYS: Final = {  # Java property -> TlsConfig field
    "tls.server.mode": "server_mode",
    "tls.enable": "enable",
    "tls.config.file": "config_file",
    "tls.test.mode.enable": "test_mode",
    "tls.server.need.client.auth": "server_need_client_auth",
    "tls.server.keyPath": "server_key_path",
    "tls.server.keyPassword": "server_key_password",
    "tls.server.certPath": "server_cert_path",
    "tls.server.authClient": "server_auth_client",
    "tls.server.trustCertPath": "server_trust_cert_path",
    "tls.client.keyPath": "client_key_path",
    "tls.client.keyPassword": "client_key_password",
    "tls.client.certPath": "client_cert_path",
    "tls.client.authServer": "client_auth_server",
    "tls.client.trustCertPath": "client_trust_cert_path",
}
_NOT_FROM_FILE: Final = ("tls.server.mode", "tls.enable", "tls.config.file")
_NEED_CLIENT_AUTH: Final = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                            "require": ssl.CERT_REQUIRED}  # fmt: skip


def _bool(key: str, raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise ValueError(f"{key}: expected true or false, got {raw!r}")


@dataclass(frozen=True)
class TlsConfig:
    """TlsSystemConfig's settings (the secrets in no repr)."""

    server_mode: TlsMode = TlsMode.PERMISSIVE
    enable: bool = False  # tls.enable: this process's own client connections use TLS
    config_file: str = DEFAULT_CONFIG_FILE
    test_mode: bool = True
    server_need_client_auth: str = "none"
    server_key_path: str = ""
    server_key_password: str = field(default="", repr=False)
    server_cert_path: str = ""
    server_auth_client: bool = False
    server_trust_cert_path: str = ""
    client_key_path: str = ""
    client_key_password: str = field(default="", repr=False)
    client_cert_path: str = ""
    client_auth_server: bool = False
    client_trust_cert_path: str = ""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsConfig:
        """The `tls.*` names of `props`, then the file `tls.config.file` over them (when it
        exists and is readable); ValueError names a bad value."""
        merged = {k: str(v) for k, v in props.items() if k in _KEYS}
        path = merged.get("tls.config.file", DEFAULT_CONFIG_FILE).strip()
        if path and os.path.isfile(path) and os.access(path, os.R_OK):
            from store.config import parse_properties_text

            with open(path, encoding="utf-8") as f:
                from_file = parse_properties_text(f.read())
            merged.update({k: v for k, v in from_file.items()
                           if k in _KEYS and k not in _NOT_FROM_FILE})  # fmt: skip
        values: dict[str, Any] = {}
        for key, raw in merged.items():
            name = _KEYS[key]
            if name == "server_mode":
                try:
                    values[name] = TlsMode(raw.strip().lower())
                except ValueError:
                    raise ValueError(f"{key}: expected disabled, permissive or enforcing, "
                                     f"got {raw!r}") from None  # fmt: skip
            elif name in ("enable", "test_mode", "server_auth_client", "client_auth_server"):
                values[name] = _bool(key, raw)
            elif name == "server_need_client_auth":
                if raw.strip().lower() not in _NEED_CLIENT_AUTH:
                    raise ValueError(f"{key}: expected none, optional or require, got {raw!r}")
                values[name] = raw.strip().lower()
            else:
                values[name] = raw.strip()
        return cls(**values)

    def replace(self, **changes: Any) -> TlsConfig:
        return dataclasses.replace(self, **changes)

    # -- contexts (TlsHelper.buildSslContext) ----------------------------------------------------
    def server_context(self) -> ssl.SSLContext:
        """The listener's context (ssl.SSLError / OSError / TlsError when it cannot be built)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if self.test_mode:
            cert, key = self_signed_pair()
            ctx.load_cert_chain(cert, key)
            return ctx
        if not self.server_cert_path or not self.server_key_path:
            raise TlsError("tls.test.mode.enable=false needs tls.server.certPath and "
                           "tls.server.keyPath")  # fmt: skip
        ctx.load_cert_chain(self.server_cert_path, self.server_key_path,
                            self.server_key_password or None)  # fmt: skip
        if self.server_auth_client and self.server_need_client_auth != "none":
            if not self.server_trust_cert_path:
                raise TlsError("tls.server.authClient=true needs tls.server.trustCertPath")
            ctx.load_verify_locations(self.server_trust_cert_path)
            ctx.verify_mode = _NEED_CLIENT_AUTH[self.server_need_client_auth]
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A client's context: trusts any server unless authServer (and not test mode)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        if self.test_mode or not self.client_auth_server:
            ctx.verify_mode = ssl.CERT_NONE
        else:
            if self.client_trust_cert_path:
                ctx.load_verify_locations(self.client_trust_cert_path)
            else:
                ctx.load_default_certs()
            ctx.verify_mode = ssl.CERT_REQUIRED
        if not self.test_mode and self.client_cert_path:
            ctx.load_cert_chain(self.client_cert_path, self.client_key_path or None,
                                self.client_key_password or None)  # fmt: skip
        return ctx


_SELF_SIGNED: list[tuple[str, str]] = []
_SELF_SIGNED_LOCK = threading.Lock()


def self_signed_pair() -> tuple[str, str]:
    """(certificate, key) PEM files of this process's test-mode certificate, made on first use
    with the `openssl` command in a private directory (Netty's SelfSignedCertificate)."""
    with _SELF_SIGNED_LOCK:
        if _SELF_SIGNED:
            return _SELF_SIGNED[0]
        exe = shutil.which("openssl")
        if exe is None:
            raise TlsError("tls.test.mode.enable=true needs the openssl command to make the "
                           "test certificate (or set tls.server.certPath / keyPath)")
        folder = tempfile.mkdtemp(prefix="actormq-tls-")  # mode 0700
        cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        run = subprocess.run(
            [exe, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", str(CERT_DAYS), "-subj", "/CN=localhost", "-keyout", key,
             "-out", cert],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            timeout=30, check=False)  # fmt: skip
        if run.returncode != 0:
            raise TlsError(f"openssl could not make the test certificate: "
                           f"{run.stderr.decode(errors='replace').strip()[:200]}")
        _SELF_SIGNED.append((cert, key))
        return cert, key


class ServerTls:
    """One listener's TLS: its mode and context (built on the first TLS connection)."""

    def __init__(self, config: TlsConfig, name: str) -> None:
        self.config = config
        self.mode = config.server_mode
        self.name = name
        self._ctx: ssl.SSLContext | None = None
        self._failed = ""
        self._refused = 0  # connections closed since the last log line
        self._next_log = 0.0

    def refused(self, peer: tuple[str, int], reason: str) -> None:
        """A connection closed for its TLS (at most one log line per REFUSAL_LOG_S: a peer
        that keeps trying cannot fill the log)."""
        self._refused += 1
        now = time.monotonic()
        if now >= self._next_log:
            log.warning("%s: %s from %s:%d, closed (%d such connection(s) since the last "
                        "report)", self.name, reason, peer[0], peer[1], self._refused)  # fmt: skip
            self._refused = 0
            self._next_log = now + REFUSAL_LOG_S

    def context(self) -> ssl.SSLContext:
        if self._ctx is None:
            if self._failed:
                raise TlsError(self._failed)
            try:
                self._ctx = self.config.server_context()
            except (OSError, ssl.SSLError, TlsError, subprocess.SubprocessError) as exc:
                self._failed = f"no TLS context: {exc}"
                log.error("%s: TLS connections are closed: %s", self.name, self._failed)
                raise TlsError(self._failed) from None
            log.info("%s: TLS context ready (mode %s%s)", self.name, self.mode.value,
                     ", test certificate" if self.config.test_mode else "")  # fmt: skip
        return self._ctx

    def session_for(self, first: int) -> TlsSession | None:
        """The first byte a connection sent decides (HandshakeHandler): a session, None for
        plain RocketMQ, TlsError when the mode refuses the connection."""
        if first == TLS_HANDSHAKE:
            if self.mode is TlsMode.DISABLED:
                raise TlsError("a TLS connection while tls.server.mode=disabled")
            return TlsSession(self.context(), server_side=True)
        if self.mode is TlsMode.ENFORCING:
            raise TlsError("a plain connection while tls.server.mode=enforcing")
        return None


class TlsSession:
    """One connection's TLS over memory BIOs: ciphertext in and out, plaintext through."""

    __slots__ = ("handshaken", "inc", "lock", "obj", "out", "plain_wait")

    def __init__(self, ctx: ssl.SSLContext, server_side: bool) -> None:
        self.inc = ssl.MemoryBIO()
        self.out = ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_side=server_side)
        self.handshaken = False
        self.plain_wait = bytearray()  # written before the handshake finished
        self.lock = threading.Lock()

    def start(self) -> bytes:
        """A client's first flight (its ClientHello)."""
        with self.lock:
            self._handshake()
            return self.out.read()

    def _handshake(self) -> None:
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            return
        except (ssl.SSLError, ValueError) as exc:
            raise TlsError(f"TLS handshake failed: {exc}") from None
        self.handshaken = True
        if self.plain_wait:
            self.obj.write(bytes(self.plain_wait))
            self.plain_wait.clear()

    def receive(self, data: bytes | memoryview) -> tuple[bytes, bytes]:
        """Feed ciphertext: (plaintext now readable, ciphertext to send back). TlsError when
        the session fails."""
        with self.lock:
            self.inc.write(data)
            if not self.handshaken:
                self._handshake()
                if not self.handshaken:
                    return b"", self.out.read()
            chunks = []
            read = self.obj.read
            while True:
                try:
                    chunk = read(READ_CHUNK)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    break
                except ssl.SSLError as exc:
                    raise TlsError(f"TLS read failed: {exc}") from None
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks), self.out.read()

    def feed(self, data: bytes | memoryview) -> bytes:
        """Ciphertext received (after the handshake): the ciphertext to send back, if any;
        the plaintext is then read with read_into."""
        with self.lock:
            self.inc.write(data)
            return self.out.read()

    def read_into(self, view: memoryview) -> int | None:
        """Plaintext fed so far, decrypted straight into view: bytes written; 0 at the peer's
        close_notify; None when more ciphertext is needed. TlsError when the session fails."""
        with self.lock:
            try:
                # with a buffer, read answers how many bytes it wrote (typeshed says bytes)
                return cast(int, self.obj.read(len(view), view))  # type: ignore[arg-type]
            except ssl.SSLWantReadError:
                return None
            except ssl.SSLZeroReturnError:
                return 0
            except ssl.SSLError as exc:
                raise TlsError(f"TLS read failed: {exc}") from None

    def encrypt(self, data: bytes | bytearray | memoryview) -> bytes:
        """Plaintext to send -> the ciphertext to write (b"" while the handshake runs: kept)."""
        with self.lock:
            if not self.handshaken:
                self.plain_wait += data
                return self.out.read()
            try:
                self.obj.write(data)
            except ssl.SSLError as exc:
                raise TlsError(f"TLS write failed: {exc}") from None
            return self.out.read()


def handshake_blocking(sock: socket.socket, session: TlsSession, timeout_s: float) -> None:
    """Run a client session's handshake over a blocking socket (TlsError, OSError)."""
    deadline = time.monotonic() + timeout_s
    first = session.start()
    if first:
        sock.sendall(first)
    while not session.handshaken:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TlsError("TLS handshake timed out")
        sock.settimeout(left)
        data = sock.recv(READ_CHUNK)
        if not data:
            raise TlsError("the server closed the connection during the TLS handshake")
        _plain, back = session.receive(data)
        if back:
            sock.sendall(back)


def client_session(config: TlsConfig | None) -> TlsSession | None:
    """A new client session when `config` asks for TLS (tls.enable), else None."""
    if config is None or not config.enable:
        return None
    return TlsSession(client_context(config), server_side=False)


_CLIENT_CONTEXTS: dict[TlsConfig, ssl.SSLContext] = {}


def client_context(config: TlsConfig) -> ssl.SSLContext:
    """One client context per settings in a process (loading certificates is slow)."""
    ctx = _CLIENT_CONTEXTS.get(config)
    if ctx is None:
        ctx = _CLIENT_CONTEXTS[config] = config.client_context()
    return ctx
