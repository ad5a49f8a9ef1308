"""The requests the benchmarks write on the wire, as the Java client and mqadmin write them.

Mirrors client/impl/MQClientAPIImpl.java's request headers (SEND_MESSAGE_V2's short keys,
PULL_MESSAGE) and tools/admin's UPDATE_AND_CREATE_TOPIC, RocketMQ 4.9.x. The integration tests
build their requests with these too.
"""

from __future__ import annotations

import time
from typing import Any, Final

from actors.client import client_requests as rq
from protocol.acl import SessionCredentials
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from protocol.headers import CreateTopicRequestHeader, PullMessageRequestHeader
from protocol.message_client_id_setter import create_uniq_id

BODY: Final = b"x" * 1024
# `bench --acl`: the benchmark's one account; every request below is signed with it
BENCH_CREDENTIALS: Final = SessionCredentials("benchAdmin1", "benchSecret1")
BENCH_PLAIN_ACL: Final = (
    "accounts:\n  - accessKey: benchAdmin1\n    secretKey: benchSecret1\n    admin: true\n")
_signing: list[SessionCredentials] = []  # the process's choice (set once, before any request)


def sign_requests(credentials: SessionCredentials | None) -> None:
    """Sign every request built from now on (None: none), as AclClientRPCHook does."""
    _signing[:] = [] if credentials is None else [credentials]


def signed(cmd: RemotingCommand) -> RemotingCommand:
    """cmd, signed when sign_requests chose credentials."""
    return _signing[0].sign(cmd) if _signing else cmd


def send_request(topic: str, queue_id: int, serialize_type: int = 0, body: bytes = BODY
                 ) -> RemotingCommand:  # fmt: skip
    """A SEND_MESSAGE_V2 request as a Java producer writes it (a 1 KiB body by default): its
    properties carry the UNIQ_KEY DefaultMQProducer gives every message (which the broker
    indexes), WAIT and TAGS, and end with a separator."""
    props = f"UNIQ_KEY\x01{create_uniq_id()}\x02WAIT\x01true\x02TAGS\x01bench\x02"
    ext = {"a": "bench_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false",
           "m": "false"}
    return signed(RemotingCommand.request(310, ext, body, serialize_type=serialize_type))


def pull_cmd(group: str, topic: str, queue_id: int, offset: int, *, max_nums: int = 32,
             sys_flag: int = 4, subscription: str | None = "*", suspend_ms: int = 0,
             commit_offset: int = 0, serialize_type: int = SerializeType.JSON
             ) -> RemotingCommand:
    """PULL_MESSAGE (11) as the clients build it; sysFlag bit 2 (0x4) means the subscription
    rides in the request."""
    head = PullMessageRequestHeader(group, topic, queue_id, offset, max_nums, sys_flag,
                                    commit_offset, suspend_ms, 0, subscription, "TAG")
    return signed(rq.pull_message(head).command(serialize_type))


def simple_cmd(code: int, serialize_type: int = SerializeType.JSON, body: bytes = b"",
               oneway: bool = False, **ext: Any) -> RemotingCommand:
    """Any request with string-valued header fields."""
    return signed(RemotingCommand.request(code, {k: str(v) for k, v in ext.items()} or None,
                                          body, serialize_type=serialize_type, oneway=oneway))


def create_topic_cmd(topic: str, queues: int = 4, perm: int = 6) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC (17) as mqadmin writes it."""
    head = CreateTopicRequestHeader(topic, "TBW102", queues, queues, perm, "SINGLE_TAG", False, 0)
    return signed(RemotingCommand.request(17, head.to_ext()))
