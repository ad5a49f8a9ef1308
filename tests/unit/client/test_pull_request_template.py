"""PullRequestTemplate (every pull of the push consumer's pull actor and of the Spark source):
each frame is byte for byte the one the generic encoder makes of the same request, and a
signed one is the generic request signed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.client.client_requests import (
    EncodedPullRequests,
    PullRequestTemplate,
    pull_frames,
    pull_message,
)
from protocol.acl import SessionCredentials
from protocol.command import RemotingCommand
from protocol.headers import PullMessageRequestHeader

names = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=12)
longs = st.integers(-(2**63), 2**63 - 1)
ints = st.integers(-(2**31), 2**31 - 1)
headers = st.builds(
    PullMessageRequestHeader, consumer_group=names, topic=names, queue_id=ints,
    queue_offset=longs, max_msg_nums=ints, sys_flag=ints, commit_offset=longs,
    suspend_timeout_millis=longs, sub_version=longs,
    subscription=st.none() | st.text(max_size=20), expression_type=st.none() | names)  # fmt: skip


def _generic(h: PullMessageRequestHeader, offset: int, nums: int, opaque: int, commit: int,
             flag: int) -> RemotingCommand:  # fmt: skip
    cmd = pull_message(dataclasses.replace(
        h, queue_offset=offset, max_msg_nums=nums, commit_offset=commit, sys_flag=flag)).command()
    cmd.opaque = opaque
    return cmd


@settings(max_examples=300, deadline=None)
@given(headers, longs, ints, ints, longs, ints)
def test_a_templated_pull_is_the_generic_encoding(h: PullMessageRequestHeader, offset: int,
                                                  nums: int, opaque: int, commit: int,
                                                  flag: int) -> None:  # fmt: skip
    tpl = PullRequestTemplate(h)
    assert tpl.frame(offset, nums, opaque, commit, flag) == \
        _generic(h, offset, nums, opaque, commit, flag).encode()  # fmt: skip
    # without commit offset and flag: the header's own (the Spark source's pulls)
    assert tpl.frame(offset, nums, opaque) == \
        _generic(h, offset, nums, opaque, h.commit_offset, h.sys_flag).encode()  # fmt: skip
    decoded = RemotingCommand.decode(memoryview(tpl.frame(offset, nums, opaque, commit,
                                                          flag))[4:])  # fmt: skip
    assert decoded.opaque == opaque and decoded.ext_fields is not None
    assert decoded.ext_fields["queueOffset"] == str(offset)
    assert decoded.ext_fields["commitOffset"] == str(commit)


def test_a_signed_pull_is_the_generic_request_signed() -> None:
    h = PullMessageRequestHeader(consumer_group="cg", topic="%RETRY%cg", queue_id=1,
                                 queue_offset=0, max_msg_nums=32, sys_flag=7, commit_offset=5,
                                 suspend_timeout_millis=15_000, sub_version=3,
                                 subscription="*", expression_type="TAG")  # fmt: skip
    creds = SessionCredentials("ak", "sk")
    signed = EncodedPullRequests(h, creds).frame(40, 32, 9, 12, 3)
    assert signed == creds.sign(_generic(h, 40, 32, 9, 12, 3)).encode()
    ext = RemotingCommand.decode(memoryview(signed)[4:]).ext_fields
    assert ext is not None and ext["AccessKey"] == "ak" and "Signature" in ext


def test_a_header_holding_the_markers_takes_the_next_set_and_all_of_them_is_refused() -> None:
    from actors.client.client_requests import _MARKER_BASE, _MARKER_TRIES

    h = PullMessageRequestHeader(consumer_group="cg", topic="T", queue_id=1, queue_offset=0,
                                 max_msg_nums=32, sys_flag=7, commit_offset=5,
                                 suspend_timeout_millis=15_000, sub_version=_MARKER_BASE[1],
                                 subscription=str(_MARKER_BASE[0]),
                                 expression_type="TAG")  # fmt: skip
    tpl = PullRequestTemplate(h)
    assert tpl.frame(3, 32, 4, 5, 6) == _generic(h, 3, 32, 4, 5, 6).encode()
    every = " ".join(str(m - 7 * k) for k in range(_MARKER_TRIES) for m in _MARKER_BASE[:1])
    with pytest.raises(ValueError, match="every marker set"):
        PullRequestTemplate(dataclasses.replace(h, subscription=every))


def test_pull_frames_takes_the_template_where_it_can_and_encodes_whole_elsewhere() -> None:
    """pull_frames (the pull actor's and the Spark source's one choice): the template for
    plain JSON; each frame whole for ACL, for ROCKETMQ headers and for names holding every
    marker set; each the generic encoding of the same request."""
    from actors.client.client_requests import _MARKER_BASE, _MARKER_TRIES
    from protocol.codes import SerializeType

    h = PullMessageRequestHeader(consumer_group="cg", topic="T", queue_id=1, queue_offset=0,
                                 max_msg_nums=32, sys_flag=7, commit_offset=5,
                                 suspend_timeout_millis=15_000, sub_version=3,
                                 subscription="*", expression_type="TAG")  # fmt: skip
    assert isinstance(pull_frames(h), PullRequestTemplate)
    creds = SessionCredentials("ak", "sk")
    assert isinstance(pull_frames(h, creds), EncodedPullRequests)
    binary = pull_frames(h, None, SerializeType.ROCKETMQ)
    assert isinstance(binary, EncodedPullRequests)
    cmd = _generic(h, 8, 32, 6, 1, 3)
    cmd.serialize_type = SerializeType.ROCKETMQ
    assert binary.frame(8, 32, 6, 1, 3) == cmd.encode()
    every = " ".join(str(m - 7 * k) for k in range(_MARKER_TRIES) for m in _MARKER_BASE[:1])
    marked = dataclasses.replace(h, subscription=every)
    whole = pull_frames(marked)
    assert isinstance(whole, EncodedPullRequests)
    assert whole.frame(8, 32, 6) == _generic(marked, 8, 32, 6, 5, 7).encode()
