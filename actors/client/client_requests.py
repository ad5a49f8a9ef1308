"""The requests MQClientAPI makes, as values: what to send and how to read the answer.

Mirrors the request-building and response-reading halves of client/impl/MQClientAPIImpl.java,
RocketMQ 4.9.x, without its transport: each function returns a ClientRequest (code, header
fields, body, and the parse that turns the answer into a value or an MQBrokerError). Header
fields are written and read by protocol.headers' typed classes, the ones the broker reads
requests with and writes answers with (Java's makeCustomHeaderToNet /
decodeCommandCustomHeader). MQClientAPI sends them over the client's RemotingClient; the admin
tools and the console send the same values over their blocking connections
(deploy.admin_ext.ask), so a request is built and its answer read in one place whoever sends
it.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

from actors.client.errors import MQBrokerError
from actors.client.records import PullResult, PullStatus
from protocol.acl import SessionCredentials
from protocol.bodies import (
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    TopicRouteData,
)
from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError
from protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from protocol.headers.command_custom_header import CommandCustomHeader

T = TypeVar("T")
H = TypeVar("H", bound=CommandCustomHeader)


def ext_of(resp: RemotingCommand) -> dict[str, str]:
    """A response's header fields (empty when it has none)."""
    return resp.ext_fields or {}


def expect_success(resp: RemotingCommand, addr: str) -> RemotingCommand:
    """The response itself when it is SUCCESS, else MQBrokerError with its code and remark."""
    if resp.code != ResponseCode.SUCCESS:
        raise MQBrokerError(resp.code, resp.remark, addr)
    return resp


def typed_header(resp: RemotingCommand, cls: type[H], addr: str) -> H:
    """A response's typed header whatever its code; a field missing or malformed is
    MQBrokerError(SYSTEM_ERROR) naming it."""
    try:
        return cls.from_ext(resp.ext_fields)
    except HeaderFieldError as exc:
        raise MQBrokerError(exc.code, exc.remark, addr) from None


def response_header(resp: RemotingCommand, cls: type[H], addr: str) -> H:
    """A SUCCESS response's typed header (MQBrokerError for another code, or for a field
    missing or malformed)."""
    return typed_header(expect_success(resp, addr), cls, addr)


def _none(resp: RemotingCommand, addr: str) -> None:
    expect_success(resp, addr)


@dataclass(frozen=True, slots=True)
class ClientRequest(Generic[T]):
    """One request: its code, header fields and body, and how its answer is read
    (parse(response, the address that answered))."""

    code: int
    ext: dict[str, str] | None
    body: bytes
    parse: Callable[[RemotingCommand, str], T]

    def command(self, serialize_type: int = 0) -> RemotingCommand:
        """A fresh command for it (a new opaque each time), headers in `serialize_type`."""
        return RemotingCommand.request(self.code, self.ext, self.body,
                                       serialize_type=serialize_type)  # fmt: skip


# -- name server --------------------------------------------------------------------------------
def _route(resp: RemotingCommand, addr: str) -> TopicRouteData | None:
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    expect_success(resp, addr)
    return TopicRouteData.from_json(bytes(resp.body))


def topic_route(topic: str) -> ClientRequest[TopicRouteData | None]:
    """GET_ROUTEINFO_BY_TOPIC; None when the topic does not exist (TOPIC_NOT_EXIST)."""
    return ClientRequest(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                         GetRouteInfoRequestHeader(topic).to_ext(), b"", _route)  # fmt: skip


# -- heartbeats ---------------------------------------------------------------------------------
def _version(resp: RemotingCommand, addr: str) -> int:
    return int(expect_success(resp, addr).version)


def heartbeat(hb: HeartbeatData) -> ClientRequest[int]:
    """HEART_BEAT; the broker's version."""
    return ClientRequest(RequestCode.HEART_BEAT, None, hb.to_json(), _version)


def unregister_client(client_id: str, producer_group: str | None,
                      consumer_group: str | None) -> ClientRequest[None]:  # fmt: skip
    """UNREGISTER_CLIENT for one group."""
    head = UnregisterClientRequestHeader(client_id, producer_group or None, consumer_group or None)
    return ClientRequest(RequestCode.UNREGISTER_CLIENT, head.to_ext(), b"", _none)


# -- offsets --------------------------------------------------------------------------------------
def _consumer_offset(resp: RemotingCommand, addr: str) -> int:
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return -1
    return response_header(resp, QueryConsumerOffsetResponseHeader, addr).offset


def query_consumer_offset(group: str, topic: str, queue_id: int) -> ClientRequest[int]:
    """QUERY_CONSUMER_OFFSET; -1 when the broker has no offset (QUERY_NOT_FOUND)."""
    head = QueryConsumerOffsetRequestHeader(group, topic, queue_id)
    return ClientRequest(RequestCode.QUERY_CONSUMER_OFFSET, head.to_ext(), b"", _consumer_offset)


def update_consumer_offset(group: str, topic: str, queue_id: int,
                           offset: int) -> ClientRequest[None]:  # fmt: skip
    """UPDATE_CONSUMER_OFFSET (answered, or sent oneway by persistConsumerOffset)."""
    head = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
    return ClientRequest(RequestCode.UPDATE_CONSUMER_OFFSET, head.to_ext(), b"", _none)


def _max_offset(resp: RemotingCommand, addr: str) -> int:
    return response_header(resp, GetMaxOffsetResponseHeader, addr).offset


def _min_offset(resp: RemotingCommand, addr: str) -> int:
    return response_header(resp, GetMinOffsetResponseHeader, addr).offset


def _searched_offset(resp: RemotingCommand, addr: str) -> int:
    return response_header(resp, SearchOffsetResponseHeader, addr).offset


def max_offset(topic: str, queue_id: int) -> ClientRequest[int]:
    """GET_MAX_OFFSET: the queue's next offset."""
    return ClientRequest(RequestCode.GET_MAX_OFFSET,
                         GetMaxOffsetRequestHeader(topic, queue_id).to_ext(), b"",
                         _max_offset)  # fmt: skip


def min_offset(topic: str, queue_id: int) -> ClientRequest[int]:
    """GET_MIN_OFFSET: the queue's first offset still stored."""
    return ClientRequest(RequestCode.GET_MIN_OFFSET,
                         GetMinOffsetRequestHeader(topic, queue_id).to_ext(), b"",
                         _min_offset)  # fmt: skip


def search_offset(topic: str, queue_id: int, timestamp_ms: int) -> ClientRequest[int]:
    """SEARCH_OFFSET_BY_TIMESTAMP."""
    head = SearchOffsetRequestHeader(topic, queue_id, timestamp_ms)
    return ClientRequest(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, head.to_ext(), b"",
                         _searched_offset)  # fmt: skip


# -- consumer groups ------------------------------------------------------------------------------
def _consumer_ids(resp: RemotingCommand, addr: str) -> list[str]:
    expect_success(resp, addr)
    if not resp.body:
        return []
    return GetConsumerListByGroupResponseBody.from_json(bytes(resp.body)).consumer_id_list


def consumer_id_list(group: str) -> ClientRequest[list[str]]:
    """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's live members."""
    return ClientRequest(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                         GetConsumerListByGroupRequestHeader(group).to_ext(), b"",
                         _consumer_ids)  # fmt: skip


def _locked(resp: RemotingCommand, addr: str) -> set[MessageQueue]:
    expect_success(resp, addr)
    return set(LockBatchResponseBody.from_json(bytes(resp.body)).lock_ok_mq_set)


def lock_batch_mq(body: LockBatchRequestBody) -> ClientRequest[set[MessageQueue]]:
    """LOCK_BATCH_MQ: the queues this client now holds the broker lock of."""
    return ClientRequest(RequestCode.LOCK_BATCH_MQ, None, body.to_json(), _locked)


def unlock_batch_mq(body_json: bytes) -> ClientRequest[None]:
    """UNLOCK_BATCH_MQ (an UnlockBatchRequestBody's JSON), answered or oneway."""
    return ClientRequest(RequestCode.UNLOCK_BATCH_MQ, None, body_json, _none)


def consumer_send_msg_back(offset: int, msg_id: str, topic: str, group: str, delay_level: int,
                           max_reconsume_times: int) -> ClientRequest[None]:  # fmt: skip
    """CONSUMER_SEND_MSG_BACK: the broker re-stores the message at commit-log `offset` in
    %RETRY%group (or the DLQ past max_reconsume_times)."""
    head = ConsumerSendMsgBackRequestHeader(offset, group, delay_level, msg_id, topic, False,
                                            max_reconsume_times)  # fmt: skip
    return ClientRequest(RequestCode.CONSUMER_SEND_MSG_BACK, head.to_ext(), b"", _none)


PULL_STATUS: Final = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def pull_response_head(resp: RemotingCommand, addr: str
                       ) -> tuple[PullStatus, PullMessageResponseHeader]:  # fmt: skip
    """A pull's response status and header (processPullResponse's reading of them; the
    consumer's reader makes its answer straight from them). MQBrokerError for a code that
    is no pull status, or a header without its offsets."""
    status = PULL_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(resp.code, resp.remark, addr)
    return status, typed_header(resp, PullMessageResponseHeader, addr)  # all four carry it


def process_pull_response(resp: RemotingCommand, addr: str, *, body: bool = True
                          ) -> PullResult:  # fmt: skip
    """processPullResponse: a pull's response as a PullResult (messages left encoded in
    body, a view of the received frame, not a copy: the frame decoder's bytes are never
    reused, while a frame read into a pull ring is valid only until its callback returns;
    body=False leaves the body out). MQBrokerError for a code that is no pull status, or a
    header without its offsets."""
    status, head = pull_response_head(resp, addr)
    return PullResult(
        status,
        head.next_begin_offset,
        head.min_offset,
        head.max_offset,
        head.suggest_which_broker_id,
        resp.body if body and status is PullStatus.FOUND else b"",
    )


def pull_message(header: PullMessageRequestHeader) -> ClientRequest[PullResult]:
    """PULL_MESSAGE (long polling when header.sys_flag has the suspend bit): its answer a
    PullResult, the messages still encoded in its body."""
    return ClientRequest(RequestCode.PULL_MESSAGE, header.to_ext(), b"", process_pull_response)


# marker values no real request carries for queueOffset, maxMsgNums, commitOffset, sysFlag and
# the opaque, each replaced per request by its value; the next set is tried when a header's own
# text holds one of them
_MARKER_BASE: Final = (7_919_191_919_191_919_191, 2_091_919_191, 7_818_181_818_181_818_181,
                       2_071_717_171, 2_081_818_181)  # fmt: skip
_MARKER_TRIES: Final = 8
_FRAME_PREFIX = struct.Struct(">ii")  # total length, serialize type << 24 | header length


class PullFrames(Protocol):
    """Who makes one queue's PULL_MESSAGE frames (a template, or signed ones)."""

    def frame(self, offset: int, nums: int, opaque: int, commit_offset: int | None = None,
              sys_flag: int | None = None) -> bytes:  # fmt: skip
        """One whole request frame (commit_offset / sys_flag None: the header's)."""
        ...


class PullRequestTemplate:
    """PULL_MESSAGE frames for one queue, byte for byte what pull_message(header).command()
    encodes (JSON), built by one bytes format: the per-pull numbers (queueOffset, maxMsgNums,
    commitOffset, sysFlag) and the opaque are put in; everything else was encoded once, by
    RemotingCommand's own encoder, with marker numbers in their place. Every pull of the push
    consumer's pull actor and of the Spark source is built here (3.7 us the generic encode,
    about 1 here)."""

    __slots__ = ("commit_offset", "fmt", "order", "sys_flag")

    def __init__(self, header: PullMessageRequestHeader) -> None:
        """ValueError when every marker set occurs in the header's own values (then the
        caller encodes each pull whole)."""
        self.commit_offset = header.commit_offset
        self.sys_flag = header.sys_flag
        for k in range(_MARKER_TRIES):
            markers = tuple(m - 7 * k for m in _MARKER_BASE)
            marked = dataclasses.replace(header, queue_offset=markers[0],
                                         max_msg_nums=markers[1], commit_offset=markers[2],
                                         sys_flag=markers[3])  # fmt: skip
            cmd = pull_message(marked).command()
            cmd.opaque = markers[4]
            header_bytes = cmd.encode()[8:]
            texts = [str(m).encode() for m in markers]
            pattern = b"|".join(re.escape(t) for t in texts)
            if all(header_bytes.count(t) == 1 for t in texts) and \
                    len(re.findall(pattern, header_bytes)) == len(texts):
                break
        else:
            raise ValueError("the PULL_MESSAGE header holds every marker set")
        pos = [header_bytes.find(t) for t in texts]
        self.order = tuple(sorted(range(len(texts)), key=pos.__getitem__))  # fields in the text
        self.fmt = re.sub(pattern, b"%d", header_bytes.replace(b"%", b"%%"))

    def frame(self, offset: int, nums: int, opaque: int, commit_offset: int | None = None,
              sys_flag: int | None = None) -> bytes:  # fmt: skip
        """One whole request frame (commit_offset / sys_flag None: the header's)."""
        values = (offset, nums, self.commit_offset if commit_offset is None else commit_offset,
                  self.sys_flag if sys_flag is None else sys_flag, opaque)  # fmt: skip
        header = self.fmt % tuple([values[i] for i in self.order])
        return _FRAME_PREFIX.pack(4 + len(header), len(header)) + header


class EncodedPullRequests:
    """PULL_MESSAGE frames for one queue, each encoded whole by RemotingCommand: what a
    template cannot make (headers other than JSON; ACL, whose signature covers the numbers;
    names that hold every marker set)."""

    __slots__ = ("credentials", "header", "serialize_type")

    def __init__(self, header: PullMessageRequestHeader,
                 credentials: SessionCredentials | None = None,
                 serialize_type: int = SerializeType.JSON) -> None:  # fmt: skip
        self.header = header
        self.credentials = credentials
        self.serialize_type = serialize_type

    def frame(self, offset: int, nums: int, opaque: int, commit_offset: int | None = None,
              sys_flag: int | None = None) -> bytes:  # fmt: skip
        """One whole request frame (commit_offset / sys_flag None: the header's)."""
        h = self.header
        cmd = pull_message(dataclasses.replace(
            h, queue_offset=offset, max_msg_nums=nums,
            commit_offset=h.commit_offset if commit_offset is None else commit_offset,
            sys_flag=h.sys_flag if sys_flag is None else sys_flag)).command(self.serialize_type)
        cmd.opaque = opaque
        return (cmd if self.credentials is None else self.credentials.sign(cmd)).encode()


def pull_frames(header: PullMessageRequestHeader, credentials: SessionCredentials | None = None,
                serialize_type: int = SerializeType.JSON) -> PullFrames:  # fmt: skip
    """A queue's PULL_MESSAGE frames: the template where it can, else each encoded whole."""
    if credentials is None and serialize_type == SerializeType.JSON:
        try:
            return PullRequestTemplate(header)
        except ValueError:  # its names hold every marker set
            pass
    return EncodedPullRequests(header, credentials, serialize_type)
