"""Request-reply over real sockets: a replier's SEND_REPLY_MESSAGE_V2 (325) reaches the requesting
producer's connection as PUSH_REPLY_MESSAGE_TO_CLIENT (326), and the requester's answer travels
back through the RemotingServer to the send actor that pushed (routed by its opaque, not by its
response code), which then answers the replier. The reply is also stored in the reply topic."""

from __future__ import annotations

import time

import pytest

from deploy.wire import BlockingClient
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import ReplyMessageRequestHeader
from protocol.message import decode_messages, decode_offset_msg_id, parse_properties
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    heartbeat_cmd,
    pull_cmd,
    send_cmd,
    simple_cmd,
    start_real,
    wait_until,
)

pytestmark = pytest.mark.integration

REQUESTER_ID = "127.0.0.1@requester-e2e"
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def _push_to(requester: BlockingClient, timeout_s: float) -> RemotingCommand:
    """The next request the broker sent the requester (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while not requester.requests and time.monotonic() < deadline:
        requester.read_for(0.05)
    assert requester.requests, "no PUSH_REPLY_MESSAGE_TO_CLIENT reached the requester"
    return requester.requests.pop(0)


def _reply_cmd(body: bytes, corr: str) -> RemotingCommand:
    props = {"CORRELATION_ID": corr, "MSG_TYPE": "reply", "TTL": "3000",
             "REPLY_TO_CLIENT": REQUESTER_ID, "UNIQ_KEY": f"U-{corr}"}
    return send_cmd(REPLY_TOPIC, body, props, code=325, group="ReplierPG")


def test_reply_pushed_to_requester_and_answer_routed_back(local_cluster) -> None:
    cluster = start_real(local_cluster)
    addr = broker_addr(cluster)
    with BlockingClient(addr) as requester, BlockingClient(addr) as replier:
        hb = heartbeat_cmd(REQUESTER_ID, None, {}, producer_groups=("RequesterPG",))
        assert requester.invoke(hb, RPC_TIMEOUT_S).code == 0

        # 1. the requester answers SUCCESS: the replier gets SEND_OK with the stored record's id
        cmd = _reply_cmd(b"reply-1", "c1")
        replier.send_raw(cmd.encode())
        push = _push_to(requester, RPC_TIMEOUT_S)
        assert push.code == RC.PUSH_REPLY_MESSAGE_TO_CLIENT and bytes(push.body) == b"reply-1"
        h = ReplyMessageRequestHeader.from_ext(push.ext_fields)
        assert h.topic == REPLY_TOPIC and h.producer_group == "ReplierPG"
        assert h.born_host.startswith("/127.0.0.1:")
        assert parse_properties(h.properties or "")["CORRELATION_ID"] == "c1"

        # a request of the requester that happens to carry the push's opaque is still a
        # request: its own processor answers it
        probe = simple_cmd(RC.GET_MAX_OFFSET, topic=REPLY_TOPIC, queueId=0)
        probe.opaque = push.opaque
        assert requester.invoke(probe, RPC_TIMEOUT_S).code == RS.SUCCESS

        requester.send_raw(push.make_response(RS.SUCCESS, None, None).encode())
        resp = replier.wait_response(cmd.opaque, RPC_TIMEOUT_S)
        assert resp.code == RS.SUCCESS, resp.remark
        phy = decode_offset_msg_id(resp.ext_fields["msgId"])[2]

        # stored in the reply topic, readable like any message
        def stored() -> list | None:
            r = replier.invoke(pull_cmd("ReplyReader", REPLY_TOPIC, 0, 0), RPC_TIMEOUT_S)
            return decode_messages(r.body) if r.code == RS.SUCCESS else None

        msgs = wait_until(stored, 10.0)
        assert msgs and bytes(msgs[0].body) == b"reply-1" and msgs[0].commit_log_offset == phy

        # 2. the requester answers an error: the replier gets SYSTEM_ERROR with Java's remark
        cmd = _reply_cmd(b"reply-2", "c2")
        replier.send_raw(cmd.encode())
        push = _push_to(requester, RPC_TIMEOUT_S)
        requester.send_raw(push.make_response(RS.SYSTEM_ERROR, "process reply message fail")
                           .encode())  # fmt: skip
        resp = replier.wait_response(cmd.opaque, RPC_TIMEOUT_S)
        assert resp.code == RS.SYSTEM_ERROR
        assert resp.remark == f"push reply message to {REQUESTER_ID}fail."

        # 3. the requester gone: the replier hears so at once (its channel is not found, or
        # the push to it failed when the close reached the send actor), not after 10 s
        requester.close()
        resp = replier.invoke(_reply_cmd(b"reply-3", "c3"), 5.0)
        assert resp.code == RS.SYSTEM_ERROR
        assert resp.remark in (f"push reply message fail, channel of <{REQUESTER_ID}> not found.",
                               f"push reply message to {REQUESTER_ID}fail.")
