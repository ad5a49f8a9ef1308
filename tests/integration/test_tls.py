"""TLS on the client ports (issue #23 part 3), started as a user starts it (`actormq up -c` with
`tls.*` settings in its broker.conf): a TLS client works in enforcing mode and a plain one is
refused; both work in permissive mode (the default, as in RocketMQ 4.9); with client
authentication a certificate from another CA, or none, is refused; the real Java 4.9.8 client
with -Dtls.enable=true works against us; our client with use_tls works against RocketMQ 4.9.8
itself; the admin CLI's --use-tls."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.tls import TlsConfig
from deploy.wire import BlockingClient
from protocol.codes import RequestCode as RC
from protocol.command import RemotingCommand
from protocol.headers import GetRouteInfoRequestHeader
from tests.integration.e2e_helpers import (
    closed_by_server,
    consume_until,
    create_topic_cmd,
    start_up_process,
)

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
TOPIC = "TlsT"


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60,
                   stdin=subprocess.DEVNULL)  # fmt: skip


def _ca(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", "30", "-subj", f"/CN={name}", "-keyout", str(key),
             "-out", str(cert))  # fmt: skip
    return cert, key


def _leaf(folder: Path, name: str, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    cert, key, csr = folder / f"{name}.pem", folder / f"{name}.key", folder / f"{name}.csr"
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
             "-CAcreateserial", "-days", "30", "-out", str(cert))  # fmt: skip
    return cert, key


@pytest.fixture
def up(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[int, int]]:
    props: dict[str, str] = getattr(request, "param", {})
    run, ns, port, _data = start_up_process(tmp_path, **props)
    try:
        yield ns, port
    finally:
        run.stop()


def _route(ns: int, tls: TlsConfig | None) -> RemotingCommand:
    cmd = RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC,
                                  GetRouteInfoRequestHeader(TOPIC).to_ext())
    with BlockingClient(("127.0.0.1", ns), tls=tls) as c:
        return c.invoke(cmd, 10.0)


def _round_trip(ns: int, use_tls: Any, group: str, n: int = 6) -> set[bytes]:
    """n sends by our Producer and what our PushConsumer gets back (bounded)."""
    from actors.client import Message, Producer

    namesrv = f"127.0.0.1:{ns}"
    bodies = {f"{group}-{i}".encode() for i in range(n)}
    with Producer(f"{group}_pg", namesrv=namesrv, use_tls=use_tls) as p:
        for body in sorted(bodies):
            assert p.send(Message(TOPIC, body)).status == "SEND_OK"
    return consume_until(namesrv, f"{group}_cg", TOPIC, bodies, use_tls=use_tls)


def _plain_frame_closed(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as s:
        s.sendall(create_topic_cmd(TOPIC, 4).encode())
        return closed_by_server(s)


@pytest.mark.parametrize("up", [{"tls.server.mode": "enforcing"}], indirect=True)
def test_enforcing_serves_tls_clients_and_closes_plain_ones(up: tuple[int, int]) -> None:
    from actors.client import MQClientError, Producer

    ns, port = up
    tls = TlsConfig(enable=True)
    with BlockingClient(("127.0.0.1", port), tls=tls) as c:
        assert c.invoke(create_topic_cmd(TOPIC, 4), 10.0).code == 0
    deadline = time.monotonic() + 30.0
    while _route(ns, tls).code != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _route(ns, tls).code == 0
    assert _round_trip(ns, True, "tls_enf") == {f"tls_enf-{i}".encode() for i in range(6)}
    # plain: the name server and both broker ports close the connection
    assert _plain_frame_closed(ns) and _plain_frame_closed(port) and _plain_frame_closed(port - 2)
    with Producer("tls_plain_pg", namesrv=f"127.0.0.1:{ns}", retries=0) as p:
        from actors.client import Message

        with pytest.raises(MQClientError):
            p.send(Message(TOPIC, b"plain"), timeout=5.0)
    # the admin CLI: --use-tls works, without it the name server closes the connection
    base = [sys.executable, "-m", "deploy", "admin", "topicRoute", "-n", f"127.0.0.1:{ns}",
            "-t", TOPIC]  # fmt: skip
    ok = subprocess.run([*base, "--use-tls"], capture_output=True, timeout=60,
                        stdin=subprocess.DEVNULL)  # fmt: skip
    assert ok.returncode == 0 and b'"brokerDatas"' in ok.stdout, ok.stderr[-2000:]
    plain = subprocess.run(base, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert plain.returncode == 1, plain.stderr[-2000:]


def test_permissive_serves_tls_and_plain_clients(up: tuple[int, int]) -> None:
    """No tls.* setting: permissive, with a test certificate, as RocketMQ 4.9's default."""
    ns, port = up
    with BlockingClient(("127.0.0.1", port)) as c:
        assert c.invoke(create_topic_cmd(TOPIC, 4), 10.0).code == 0
    deadline = time.monotonic() + 30.0
    while _route(ns, None).code != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _route(ns, TlsConfig(enable=True)).code == 0
    assert _round_trip(ns, True, "perm_tls") == {f"perm_tls-{i}".encode() for i in range(6)}
    assert _round_trip(ns, False, "perm_plain") == {f"perm_plain-{i}".encode() for i in range(6)}


def test_client_authentication_refuses_a_certificate_of_another_ca(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    ca, other_ca = _ca(certs, "ca1"), _ca(certs, "ca2")
    server, good, bad = _leaf(certs, "server", ca), _leaf(certs, "good", ca), \
        _leaf(certs, "bad", other_ca)  # fmt: skip
    props = {
        "tls.server.mode": "enforcing", "tls.test.mode.enable": "false",
        "tls.server.certPath": str(server[0]), "tls.server.keyPath": str(server[1]),
        "tls.server.need.client.auth": "require", "tls.server.authClient": "true",
        "tls.server.trustCertPath": str(ca[0]),
        # the broker's own connection to its name server presents a good certificate
        "tls.client.certPath": str(good[0]), "tls.client.keyPath": str(good[1]),
        "tls.client.authServer": "true", "tls.client.trustCertPath": str(ca[0]),
    }
    run, ns, port, _data = start_up_process(tmp_path, **props)
    try:
        def client(cert: tuple[Path, Path] | None, trust: Path = ca[0]) -> TlsConfig:
            return TlsConfig(enable=True, test_mode=False, client_auth_server=True,
                             client_trust_cert_path=str(trust),
                             client_cert_path=str(cert[0]) if cert else "",
                             client_key_path=str(cert[1]) if cert else "")  # fmt: skip

        with BlockingClient(("127.0.0.1", port), tls=client(good)) as c:
            assert c.invoke(create_topic_cmd(TOPIC, 4), 10.0).code == 0
        # a certificate of another CA, none, and a server its CA did not sign (the client's
        # own check): refused
        for refused in (client(bad), client(None), client(good, other_ca[0])):
            with pytest.raises(OSError), BlockingClient(("127.0.0.1", port), tls=refused) as c:
                c.invoke(create_topic_cmd(TOPIC, 4), 10.0)
        deadline = time.monotonic() + 30.0
        while _route(ns, client(good)).code != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _round_trip(ns, client(good), "mtls") == {f"mtls-{i}".encode() for i in range(6)}
    finally:
        run.stop()


@pytest.mark.parametrize("up", [{"tls.server.mode": "enforcing"}], indirect=True)
def test_the_java_client_with_tls_enable(up: tuple[int, int], reference_build: Path,
                                         tmp_path: Path) -> None:  # fmt: skip
    from deploy.reference import client_classpath

    ns, port = up
    with BlockingClient(("127.0.0.1", port), tls=TlsConfig(enable=True)) as c:
        assert c.invoke(create_topic_cmd(TOPIC, 4), 10.0).code == 0
    cp = client_classpath()
    out = tmp_path / "classes"
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(CLIENTS / "AclClient.java")],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)

    def run(*jvm: str, timeout_s: float = 180.0) -> list[str]:
        argv = ["java", *jvm, "-cp", f"{cp}:{out}", "AclClient", f"127.0.0.1:{ns}", TOPIC,
                "-", "-", "3"]  # fmt: skip
        try:
            res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                 timeout=timeout_s)  # fmt: skip
            text = res.stdout
        except subprocess.TimeoutExpired as exc:  # killed: what it printed until then
            text = exc.output or b""
        return [ln for ln in text.decode().splitlines() if ln.startswith(("OK", "ERR"))]

    assert run("-Dtls.enable=true") == ["OK SEND_OK"] * 3
    # a plain Java client gets nothing through (it retries the closed name server for long)
    assert not any(ln.startswith("OK") for ln in run(timeout_s=45.0))


def test_our_client_with_use_tls_against_rocketmq_4_9_8(reference_build: Path,
                                                        tmp_path: Path) -> None:
    """RocketMQ 4.9.8's broker and name server in their default mode (permissive, test
    certificate): our Producer and PushConsumer over TLS."""
    from deploy import reference

    with reference.reference_cluster(str(tmp_path / "ref")) as ref:
        with BlockingClient(("127.0.0.1", ref.broker_port), tls=TlsConfig(enable=True)) as c:
            assert c.invoke(create_topic_cmd(TOPIC, 4), 10.0).code == 0
        deadline = time.monotonic() + 60.0
        while _route(ref.namesrv_port, TlsConfig(enable=True)).code != 0 and \
                time.monotonic() < deadline:  # fmt: skip
            time.sleep(0.2)
        got = _round_trip(ref.namesrv_port, True, "ref_tls")
        assert got == {f"ref_tls-{i}".encode() for i in range(6)}
