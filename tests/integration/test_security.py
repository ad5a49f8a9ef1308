"""Only the ports the user asked for listen beyond loopback (Thespian's stay on 127.0.0.1)."""

from __future__ import annotations

import os
import pickle
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from deploy import procinfo

CLIENTS = Path(__file__).resolve().parents[1] / "clients"

pytestmark = pytest.mark.integration


def test_only_requested_ports_face_the_network(up_process) -> None:
    up = up_process(host="0.0.0.0")
    up.wait_ready()
    listeners = procinfo.listeners_of(up.pids())
    ports = {port for _pid, _ip, port in listeners}
    assert {up.ns_port, up.broker_port} <= ports
    assert len(listeners) >= 4  # admin + actor ports + the client ports
    exposed = {(ip, port) for _pid, ip, port in listeners if not ip.startswith("127.")}
    log_text = (up.out_path.parent / "data" / "actormq.log").read_text(errors="replace")
    # the broker's VIP channel (spec §1.1) listens on broker_port - 2 (the broker refuses to
    # start when it is taken),
    # a master's HA service (spec §10) on broker_port + 1 (or a free port when that was taken)
    vip = ("0.0.0.0", up.broker_port - 2)
    ha_ports = {int(p) for p in re.findall(r"HA service listening on 0\.0\.0\.0:(\d+)", log_text)}
    assert len(ha_ports) == 1, log_text[-2000:]
    ha = ("0.0.0.0", ha_ports.pop())
    assert exposed == {vip, ("0.0.0.0", up.ns_port), ("0.0.0.0", up.broker_port), ha}, listeners


def test_loopback_host_exposes_nothing(up_process) -> None:
    up = up_process(host="127.0.0.1")
    up.wait_ready()
    listeners = procinfo.listeners_of(up.pids())
    assert listeners
    assert all(ip.startswith("127.") for _pid, ip, _port in listeners), listeners


# -- no port of ours unpickles what a peer outside the actor system sends -------------------------

NOBODY = 65534


class _Plant:
    """Unpickled, it creates a file as whoever unpickles it (the proof a port ran our code)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.path, "w"))


def _read_answer(s: socket.socket, deadline: float) -> bytes:
    """One Thespian packet (b"<len>>" + len bytes) or what came before a close / the deadline."""
    got = b""
    while (left := deadline - time.monotonic()) > 0:
        head, mark, rest = got.partition(b">")
        if mark and head.isdigit() and len(rest) >= int(head):
            break
        s.settimeout(left)
        try:
            chunk = s.recv(4096)
        except TimeoutError:
            break
        if not chunk:
            break
        got += chunk
    return got


def _attack_as_nobody(targets: list[tuple[str, int]], plant_dir: Path) -> dict[int, bytes]:
    """Fork a child that drops to uid/gid nobody and sends one Thespian-framed pickle (which
    creates plant_dir/<port> when unpickled) to each (ip, port); what each port answered.

    Thespian answers a packet it took with a pickled 'ACK' (or 'ACK+DATAERR' when the
    unpickled object was not an envelope): the child reads until the answer or the connection
    closes, so the unpickling, if any, is over when it returns (no waiting on time)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the hostile local user
        code = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            assert os.getuid() == NOBODY and os.geteuid() == NOBODY
            answers: dict[int, bytes] = {}
            for ip, port in targets:
                blob = pickle.dumps(_Plant(str(plant_dir / str(port))))
                try:
                    with socket.create_connection((ip, port), timeout=3.0) as s:
                        s.sendall(b"%d>" % len(blob) + blob)
                        got = _read_answer(s, time.monotonic() + 3.0)
                except OSError as e:
                    got = f"[{type(e).__name__}]".encode()
                answers[port] = got
            os.write(write_fd, pickle.dumps(answers))
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as r:
        data = r.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the hostile child failed"
    answers = pickle.loads(data)
    assert isinstance(answers, dict)
    return answers


def test_no_port_unpickles_from_another_user(up_process, tmp_path: Path) -> None:
    """A process of another user sends a pickle to every listening port of `up` (admin, actors,
    name server, broker, VIP, HA) and of a client application's actor system: none of them
    unpickles it, and both keep serving."""
    from actors.client import Message, Producer
    from deploy.wire import BlockingClient
    from tests.integration.conftest import MarkedProcess
    from tests.integration.e2e_helpers import RPC_TIMEOUT_S, create_topic_cmd

    plant_dir = tmp_path / "planted"
    plant_dir.mkdir()
    os.chmod(tmp_path, 0o755)  # the servers (this user) can write there; nobody cannot
    os.chmod(plant_dir, 0o700)
    up = up_process(echo=False)
    up.wait_ready()
    namesrv = f"127.0.0.1:{up.ns_port}"
    with BlockingClient(("127.0.0.1", up.broker_port)) as c:
        assert c.invoke(create_topic_cmd("SecTopic", 2), RPC_TIMEOUT_S).code == 0
    client = MarkedProcess([sys.executable, str(CLIENTS / "py_consumer.py"), namesrv,
                            "SecTopic", "sec_cg"], tmp_path / "client", os.getcwd())
    try:
        client.wait_for('"event": "ready"', 60.0)
        up_pids, client_pids = set(up.pids()), set(client.pids())
        targets = sorted({(ip, port) for _pid, ip, port in
                          procinfo.listeners_of(sorted(up_pids | client_pids))})
        thespian_admins = {port for _pid, _ip, port in procinfo.listeners_of(sorted(client_pids))}
        assert len(thespian_admins) >= 2, "the client's actor system has ports to attack"
        assert len(targets) >= 10, targets
        answers = _attack_as_nobody([("127.0.0.1" if ip == "0.0.0.0" else ip, port)
                                     for ip, port in targets], plant_dir)
        planted = sorted(p.name for p in plant_dir.iterdir())
        assert planted == [], f"ports that unpickled another user's bytes: {planted} " \
                              f"(answers: {answers})"
        # both still serve: a message sent now reaches the client's consumer
        assert set(up.pids()) == up_pids and set(client.pids()) == client_pids
        with Producer("sec_pg", namesrv=namesrv) as p:
            assert p.send(Message("SecTopic", b"after")).status == "SEND_OK"
        client.wait_for('"body": "after"', 60.0)
    finally:
        client.stop()
