"""Deletes ordered with sends and registrations (issue #12, defects 2 and 3), 100 rounds each
against the real broker and name server.

1. DELETE_TOPIC_IN_BROKER with a SEND_MESSAGE_V2 pipelined right behind it on one connection,
   then a send on a second connection once the delete is answered: each of those sends makes
   the topic anew (queue offsets from 0) or is refused, every acknowledged message is pulled
   back by its queue and offset, and readers in other processes (GET_MAX_OFFSET in the admin
   actor, pulls in the pull actor) no longer see the old queues once the delete is answered.
2. UPDATE_BROKER_CONFIG, DELETE_TOPIC_IN_BROKER and DELETE_TOPIC_IN_NAMESRV back to back: the
   route is gone and stays gone, across the periodic registration that follows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.wire import BlockingClient
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.message import decode_messages
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    create_topic_cmd,
    get_route,
    msg_props,
    pull_cmd,
    send_cmd,
    simple_cmd,
    start_real,
    start_up_process,
    wait_until,
)

pytestmark = pytest.mark.integration

ROUNDS = 100
Acked = tuple[int, int, bytes]  # (queue id, queue offset, body)


def _send(cl: BlockingClient, topic: str, qid: int, body: bytes) -> list[Acked]:
    """A send; [(qid, offset, body)] when acknowledged, [] when refused (topic not there)."""
    r = cl.invoke(send_cmd(topic, body, msg_props(), queue_id=qid), RPC_TIMEOUT_S)
    return _outcome(r, qid, body)


def _outcome(r, qid: int, body: bytes) -> list[Acked]:  # type: ignore[no-untyped-def]
    if r.code == RS.SUCCESS:
        return [(qid, int(r.ext_fields["queueOffset"]), body)]
    assert r.code == RS.TOPIC_NOT_EXIST, (r.code, r.remark)
    return []


def _check_reachable(cl: BlockingClient, topic: str, acked: list[Acked]) -> None:
    """Every acknowledged message is where its answer said; the queues hold nothing else."""
    for qid, offset, body in acked:
        r = cl.invoke(pull_cmd("race_cg", topic, qid, offset, max_nums=1), RPC_TIMEOUT_S)
        got = [bytes(m.body) for m in decode_messages(r.body)] if r.code == RS.SUCCESS else []
        assert got == [body], f"acknowledged {body!r} at {qid}/{offset} unreachable: {r.code}"
    for qid in (0, 1):
        r = cl.invoke(simple_cmd(RC.GET_MAX_OFFSET, topic=topic, queueId=qid), RPC_TIMEOUT_S)
        assert int(r.ext_fields["offset"]) == sum(1 for q, _o, _b in acked if q == qid)


def test_sends_after_a_delete_are_never_lost(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "RaceSend"
    remade = refused = 0
    with BlockingClient(broker_addr(cluster)) as cl, BlockingClient(broker_addr(cluster)) as other:
        assert cl.invoke(create_topic_cmd(topic, 2), RPC_TIMEOUT_S).code == 0
        acked: list[Acked] = []  # acknowledged since the last delete
        for i in range(ROUNDS):
            for qid in (0, 1):
                acked += _send(other, topic, qid, b"before-%d-%d" % (i, qid))
            _check_reachable(cl, topic, acked)
            behind = b"behind-%d" % i
            deleted, sent = cl.invoke_many(
                [simple_cmd(RC.DELETE_TOPIC_IN_BROKER, topic=topic),
                 send_cmd(topic, behind, msg_props(), queue_id=0)], RPC_TIMEOUT_S)  # fmt: skip
            assert deleted.code == RS.SUCCESS, deleted.remark
            acked = _outcome(sent, 0, behind)
            if acked:
                assert acked[0][1] == 0  # a new queue: the topic was made anew
                remade += 1
            else:
                refused += 1
            # the old queue 1 is gone for every reader once the delete is answered
            r = other.invoke(simple_cmd(RC.GET_MAX_OFFSET, topic=topic, queueId=1), RPC_TIMEOUT_S)
            assert r.ext_fields["offset"] == "0", f"round {i}: GET_MAX_OFFSET saw the old queue"
            r = other.invoke(pull_cmd("race_cg", topic, 1, 0), RPC_TIMEOUT_S)
            assert r.code != RS.SUCCESS, f"round {i}: a pull read the deleted queue"
            acked += _send(other, topic, 1, b"after-%d" % i)  # another connection, after
            assert [o for q, o, _b in acked if q == 1] in ([], [0])
            _check_reachable(cl, topic, acked)
    assert remade + refused == ROUNDS and remade > 0  # autoCreateTopicEnable: made anew


def _registrations(log_path: Path) -> int:
    text = log_path.read_text(errors="replace")
    return text.count("actors.broker.controller: registered with name server")


def test_a_topic_deleted_in_broker_and_name_server_stays_deleted(tmp_path) -> None:
    run, ns_port, broker_port, data = start_up_process(tmp_path, registerNameServerPeriod="10000")
    ns = ("127.0.0.1", ns_port)
    topics = [f"RaceRoute{i}" for i in range(ROUNDS)]
    try:
        with BlockingClient(("127.0.0.1", broker_port)) as cl, BlockingClient(ns) as nc:
            for i, topic in enumerate(topics):
                assert cl.invoke(create_topic_cmd(topic, 2), RPC_TIMEOUT_S).code == 0
                assert nc.invoke(simple_cmd(RC.GET_ROUTEINFO_BY_TOPIC, topic=topic),
                                 RPC_TIMEOUT_S).code == RS.SUCCESS  # answered once registered
                update = simple_cmd(RC.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\n")
                delete = simple_cmd(RC.DELETE_TOPIC_IN_BROKER, topic=topic)
                if i % 2:  # pipelined on one connection
                    updated, deleted = cl.invoke_many([update, delete], RPC_TIMEOUT_S)
                else:  # one after the other, each answer awaited (the sequence)
                    updated = cl.invoke(update, RPC_TIMEOUT_S)
                    deleted = cl.invoke(delete, RPC_TIMEOUT_S)
                assert updated.code == deleted.code == RS.SUCCESS
                r = nc.invoke(simple_cmd(RC.DELETE_TOPIC_IN_NAMESRV, topic=topic), RPC_TIMEOUT_S)
                assert r.code == RS.SUCCESS
                r = nc.invoke(simple_cmd(RC.GET_ROUTEINFO_BY_TOPIC, topic=topic), RPC_TIMEOUT_S)
                assert r.code == RS.TOPIC_NOT_EXIST, f"{topic}: route back at once"
        # the registrations that follow (periodic, every 10 s here) bring none of them back
        log_path = data / "actormq.log"
        seen = _registrations(log_path)
        assert wait_until(lambda: _registrations(log_path) > seen, 15.0), "no registration"
        resurrected = [t for t in topics if get_route(ns, t).code != RS.TOPIC_NOT_EXIST]
        assert resurrected == []
        with BlockingClient(ns) as nc:
            r = nc.invoke(simple_cmd(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), RPC_TIMEOUT_S)
            assert b"RaceRoute" not in bytes(r.body)
    finally:
        assert run.stop() == 0
