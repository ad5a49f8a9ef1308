"""Bad input never takes the RemotingServer down; a good client elsewhere is unaffected."""

from __future__ import annotations

import random
import socket
import struct
from pathlib import Path

import pytest

from deploy import actor_logging, launch
from deploy.wire import BlockingClient
from protocol.codes import ResponseCode
from protocol.command import RemotingCommand
from tests.integration.e2e_helpers import closed_by_server

pytestmark = pytest.mark.integration


def _frame(header: bytes, body: bytes = b"", stype: int = 0, hlen: int | None = None) -> bytes:
    hl = len(header) if hlen is None else hlen
    return struct.pack(">ii", 4 + len(header) + len(body), (stype << 24) | hl) + header + body


BAD_INPUTS = {
    "oversized_length": struct.pack(">i", 64 * 1024 * 1024) + b"\x00" * 16,
    "negative_length": struct.pack(">i", -5) + b"\x00" * 8,
    "header_beyond_frame": _frame(b'{"code":10}', hlen=5000),
    "invalid_json": _frame(b'{"code":10,,,'),
    "json_not_object": _frame(b"[1,2,3]"),
    "unknown_serialize_type": _frame(b"xxxxxxxxxxxxxxxxxxxxxxx", stype=7),
    "short_binary_header": _frame(b"\x00\x0a", stype=1),
    "bad_msgpack": _frame(b"\xc1\xc1\xc1", stype=2),
}


@pytest.fixture
def broker(local_cluster):
    cluster = local_cluster(max_frame=1024 * 1024)
    return ("127.0.0.1", cluster.broker_port())


def _good(cl: BlockingClient) -> None:
    resp = cl.invoke(RemotingCommand.request(310, None, b"good"), 10)
    assert resp.code == 0 and bytes(resp.body) == b"good"


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_frames_close_only_that_connection(broker, name: str) -> None:
    with BlockingClient(broker) as good:
        _good(good)
        with socket.create_connection(broker, timeout=5) as bad:
            bad.sendall(BAD_INPUTS[name])
            assert closed_by_server(bad)
        _good(good)


def test_missing_header_fields_get_an_answer_not_a_crash(broker) -> None:
    with BlockingClient(broker) as cl:
        # no code at all -> code 0 -> default group -> not supported
        cl.send_raw(_frame(b'{"opaque":77,"flag":0}'))
        assert cl.wait_response(77, 10).code == 3
        _good(cl)


def test_random_bytes(broker) -> None:
    rng = random.Random(4)
    with BlockingClient(broker) as good:
        for _ in range(20):
            with socket.create_connection(broker, timeout=5) as bad:
                try:
                    bad.sendall(rng.randbytes(rng.randint(1, 4096)))
                except OSError:
                    pass
        _good(good)


def test_thousand_connections_dropped_mid_frame(broker) -> None:
    frame = RemotingCommand.request(310, None, b"z" * 200).encode()
    with BlockingClient(broker) as good:
        for batch in range(10):
            socks = []
            for _ in range(100):
                s = socket.create_connection(broker, timeout=5)
                s.sendall(frame[: 7 + batch * 10])
                socks.append(s)
            for s in socks:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            _good(good)
        _good(good)


def test_a_flood_of_unknown_codes_is_answered_and_its_warnings_capped(local_cluster) -> None:
    """Every request of a flood gets REQUEST_CODE_NOT_SUPPORTED, and the log file gets at most
    a burst of the warning per window (it does not roll: a peer must not fill the disk)."""
    cluster = local_cluster(broker=launch.BROKER_CONTROLLER)
    addr = ("127.0.0.1", cluster.broker_port())
    flood = 300
    with BlockingClient(addr) as cl:
        for _ in range(flood):
            resp = cl.invoke(RemotingCommand.request(9999, None, b""), 10)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    log_text = (Path(cluster.data_dir) / "actormq.log").read_text(errors="replace")
    warned = log_text.count("request type 9999 not supported")
    assert 1 <= warned <= actor_logging.BURST, warned
