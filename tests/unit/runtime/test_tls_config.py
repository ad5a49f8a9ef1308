"""TLS settings and sessions (actors/runtime/tls.py): TlsSystemConfig's names and defaults, the
tls.config.file overlay, the first-byte decision of each tls.server.mode, and a client and a
server session talking through memory only."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.client.client_config import tls_setting
from actors.runtime.tls import (
    TLS_HANDSHAKE,
    ServerTls,
    TlsConfig,
    TlsError,
    TlsMode,
    TlsSession,
    client_context,
)


def test_defaults_are_rocketmq_4_9s() -> None:
    cfg = TlsConfig.from_properties({"tls.config.file": "/nonexistent/tls.properties"})
    assert cfg.server_mode is TlsMode.PERMISSIVE and cfg.test_mode and not cfg.enable
    assert cfg.server_need_client_auth == "none" and not cfg.client_auth_server


def test_settings_by_java_names_and_the_file_over_them(tmp_path: Path) -> None:
    f = tmp_path / "tls.properties"
    f.write_text("tls.test.mode.enable=false\ntls.server.mode=disabled\n"
                 "tls.client.authServer=true\ntls.client.keyPassword=s3cret\n")  # fmt: skip
    cfg = TlsConfig.from_properties({
        "tls.server.mode": "Enforcing", "tls.enable": "true", "tls.test.mode.enable": "true",
        "tls.config.file": str(f), "brokerName": "ignored"})  # fmt: skip
    # the file overrides every key but the mode, tls.enable and its own name (as Java)
    assert cfg.server_mode is TlsMode.ENFORCING and cfg.enable
    assert not cfg.test_mode and cfg.client_auth_server
    assert cfg.client_key_password == "s3cret" and "s3cret" not in repr(cfg)


@pytest.mark.parametrize(("key", "value"), [
    ("tls.server.mode", "strict"), ("tls.enable", "yes"),
    ("tls.server.need.client.auth", "always"), ("tls.client.authServer", "1")])
def test_bad_values_name_their_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        TlsConfig.from_properties({key: value, "tls.config.file": ""})


def test_the_first_byte_decides_as_each_mode_says() -> None:
    plain = 0x00  # a RocketMQ frame starts with its length's high byte
    permissive = ServerTls(TlsConfig(), "t")
    assert permissive.session_for(plain) is None
    assert isinstance(permissive.session_for(TLS_HANDSHAKE), TlsSession)
    enforcing = ServerTls(TlsConfig(server_mode=TlsMode.ENFORCING), "t")
    with pytest.raises(TlsError, match="plain connection"):
        enforcing.session_for(plain)
    disabled = ServerTls(TlsConfig(server_mode=TlsMode.DISABLED), "t")
    with pytest.raises(TlsError, match="disabled"):
        disabled.session_for(TLS_HANDSHAKE)


def _pump(client: TlsSession, server: TlsSession, first: bytes) -> tuple[bytes, bytes]:
    """Carry flights between the two sessions until neither has anything to say; what each
    side read as plaintext."""
    to_server, to_client = first, b""
    got_server, got_client = b"", b""
    for _ in range(20):
        if not to_server and not to_client:
            break
        if to_server:
            plain, to_client_more = server.receive(to_server)
            got_server += plain
            to_client += to_client_more
            to_server = b""
        if to_client:
            plain, to_server = client.receive(to_client)
            got_client += plain
            to_client = b""
    return got_server, got_client


def test_a_client_and_a_server_session_through_memory() -> None:
    server_tls = ServerTls(TlsConfig(server_mode=TlsMode.ENFORCING), "t")
    hello = TlsSession(client_context(TlsConfig(enable=True)), server_side=False)
    first = hello.start()
    assert first[0] == TLS_HANDSHAKE
    server = server_tls.session_for(first[0])
    assert server is not None
    # written before the handshake ends: kept, then sent once it is done
    early = hello.encrypt(b"request-1")
    got_server, _ = _pump(hello, server, first + early)
    assert hello.handshaken and server.handshaken
    assert got_server == b"request-1"
    big = bytes(range(256)) * 1024  # several TLS records
    cipher = server.encrypt(big)
    assert big not in cipher
    plain, _back = hello.receive(cipher)
    assert plain == big


def test_a_tampered_record_fails_the_session() -> None:
    server_tls = ServerTls(TlsConfig(), "t")
    client = TlsSession(client_context(TlsConfig(enable=True)), server_side=False)
    first = client.start()
    server = server_tls.session_for(first[0])
    assert server is not None
    _pump(client, server, first)
    cipher = bytearray(client.encrypt(b"x" * 100))
    cipher[-5] ^= 0xFF
    with pytest.raises(TlsError):
        server.receive(bytes(cipher))


def test_use_tls_of_a_client() -> None:
    assert tls_setting(False) is None
    on = tls_setting(True)
    assert on is not None and on.enable and on.test_mode
    custom = tls_setting(TlsConfig(test_mode=False, client_auth_server=True))
    assert custom is not None and custom.enable and custom.client_auth_server
    with pytest.raises(TypeError):
        tls_setting("yes")  # type: ignore[arg-type]


def test_the_ha_port_and_tcp_channels_stay_off_public_addresses() -> None:
    from actors.broker.config import BrokerConfig
    from deploy.launch import StartError, check_private_ports, is_public
    from store.config import StoreConfig

    assert is_public("8.8.8.8") and not is_public("10.1.2.3") and not is_public("127.0.0.1")
    assert not is_public("0.0.0.0")
    bc, sc = BrokerConfig(), StoreConfig()
    check_private_ports("10.1.2.3", bc, sc, None)
    with pytest.raises(StartError, match="HA port"):
        check_private_ports("8.8.8.8", bc, sc, TlsConfig())
    check_private_ports("8.8.8.8", bc, sc, TlsConfig(server_mode=TlsMode.ENFORCING))
    check_private_ports("8.8.8.8", bc, StoreConfig(haListenPort=-1), None)
    tcp = BrokerConfig(processorChannel="tcp", processorChannelHost="8.8.4.4")
    with pytest.raises(StartError, match="processorChannelHost"):
        check_private_ports("127.0.0.1", tcp, sc, TlsConfig(server_mode=TlsMode.ENFORCING))
