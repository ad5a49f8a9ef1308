"""Runtime integration: routing, fast failure, errors, oneway, arrival notices (echo cores)."""

from __future__ import annotations

import time

import pytest

from deploy.wire import BlockingClient
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from tests.integration.conftest import REAL, SLOW_ECHO

pytestmark = pytest.mark.integration


def _addr(cluster) -> tuple[str, int]:
    return ("127.0.0.1", cluster.broker_port())


def test_echo_round_trip_all_serializations(local_cluster) -> None:
    cluster = local_cluster()
    with BlockingClient(_addr(cluster)) as cl:
        for st in (SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK):
            req = RemotingCommand.request(310, {"k": "v"}, b"payload", serialize_type=st)
            resp = cl.invoke(req, 10)
            assert resp.code == 0
            assert resp.opaque == req.opaque
            assert resp.serialize_type == st
            assert resp.version == 409
            assert bytes(resp.body) == b"payload"
            assert resp.ext_fields["peer"].startswith("127.0.0.1:")


def test_unknown_code_is_not_supported(local_cluster) -> None:
    cluster = local_cluster()
    with BlockingClient(_addr(cluster)) as cl:
        resp = cl.invoke(RemotingCommand.request(4321), 10)
        assert resp.code == 3
        assert resp.remark == " request type 4321 not supported"
        # never for a oneway request (spec §1.6: the broker has a default processor)
        req = RemotingCommand.request(4322, oneway=True)
        cl.invoke_oneway(req)
        assert cl.invoke(RemotingCommand.request(4323), 10).code == 3  # same group, after it
        cl.read_for(0.3)
        assert req.opaque not in cl.pending


def test_processor_exception_is_system_error_and_server_keeps_serving(local_cluster) -> None:
    cluster = local_cluster()
    with BlockingClient(_addr(cluster)) as cl:
        resp = cl.invoke(RemotingCommand.request(9999), 10)
        assert resp.code == 1
        assert "echo core asked to fail" in (resp.remark or "")
        for _ in range(3):
            assert cl.invoke(RemotingCommand.request(310, None, b"x"), 10).code == 0
            assert cl.invoke(RemotingCommand.request(9999), 10).code == 1


def test_oneway_never_answered(local_cluster) -> None:
    cluster = local_cluster()
    with BlockingClient(_addr(cluster)) as cl:
        oneways = [RemotingCommand.request(310, None, b"o", oneway=True) for _ in range(5)]
        oneways.append(RemotingCommand.request(9999, oneway=True))  # failing oneway: silent too
        for req in oneways:
            cl.invoke_oneway(req)
        # a later sync request's answer proves the oneways were processed before it
        last = cl.invoke(RemotingCommand.request(11, None, b"sync"), 10)
        assert last.code == 0
        cl.read_for(0.3)
        assert not any(r.opaque in cl.pending for r in oneways)


def test_fast_failure_leaves_other_groups_unaffected(local_cluster) -> None:
    cluster = local_cluster(broker=SLOW_ECHO)
    with BlockingClient(_addr(cluster)) as sends, BlockingClient(_addr(cluster)) as pulls:
        reqs = [RemotingCommand.request(310, None, b"s") for _ in range(6)]
        sends.send_raw(b"".join(r.encode() for r in reqs))
        t0 = time.monotonic()
        # while the send group is stuck sleeping, the pull group answers at once
        pull = pulls.invoke(RemotingCommand.request(11, None, b"p"), 10)
        pull_latency = time.monotonic() - t0
        assert pull.code == 0
        answers = [sends.wait_response(r.opaque, 20) for r in reqs]
    codes = [a.code for a in answers]
    assert codes[0] == 0  # the first one waited less than 200 ms
    busy = [a for a in answers if a.code == 2]
    assert busy, codes
    for a in busy:
        assert a.remark.startswith(
            "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "
        )
        assert "ms, size of queue: " in a.remark
    assert pull_latency < 0.3 * len(reqs)  # not serialized behind the slow sends


def test_arrival_notices_reach_pull_and_events_reach_audience(local_cluster) -> None:
    cluster = local_cluster()
    with BlockingClient(_addr(cluster)) as cl:
        for _ in range(5):
            assert cl.invoke(RemotingCommand.request(310, None, b"m"), 10).code == 0
        assert cl.invoke(RemotingCommand.request(9998), 10).code == 0  # admin emits a ping
        ext: dict[str, str] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ext = cl.invoke(RemotingCommand.request(11), 10).ext_fields
            if ext["seen"] == "5" and ext["pings"] == "1":
                break
            time.sleep(0.05)
        assert ext == {"seen": "5", "pings": "1"}


def test_idle_connection_closed(local_cluster) -> None:
    cluster = local_cluster(idle_s=0.5)
    with BlockingClient(_addr(cluster)) as cl:
        assert cl.invoke(RemotingCommand.request(11), 10).code == 0
        with pytest.raises(ConnectionError):
            cl.read_for(5.0)


def test_real_broker_send_registers_and_routes(local_cluster) -> None:
    from deploy.bench.requests import send_request

    cluster = local_cluster(broker=REAL)
    port = cluster.broker_port()
    with BlockingClient(("127.0.0.1", port)) as cl:
        resp = cl.invoke(send_request("RtTopic", 0), 10)
        assert resp.code == 0, resp.remark
        assert resp.ext_fields["queueOffset"] == "0"
        assert cl.invoke(RemotingCommand.request(4321), 10).code == 3
    body = b""
    deadline = time.monotonic() + 10
    with BlockingClient(("127.0.0.1", cluster.namesrv_port)) as ns:
        while time.monotonic() < deadline:
            r = ns.invoke(RemotingCommand.request(105, {"topic": "RtTopic"}), 10)
            if r.code == 0:
                body = bytes(r.body)
                break
            time.sleep(0.1)
    assert f'"127.0.0.1:{port}"'.encode() in body


def test_replicated_event_precedes_the_reply_it_caused(local_cluster) -> None:
    """Causal order: a request sent after an event's reply sees that event, with no waiting."""
    cluster = local_cluster()
    with BlockingClient(_addr(cluster)) as cl:
        for n in range(1, 21):
            assert cl.invoke(RemotingCommand.request(9998), 10).code == 0  # admin emits a ping
            assert cl.invoke(RemotingCommand.request(11), 10).ext_fields["pings"] == str(n)
