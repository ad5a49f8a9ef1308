"""Pre-rendered SUCCESS headers (the send core's, a pull's FOUND with its remark and body)
encode byte for byte like the generic encoder."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codes import SerializeType
from protocol.command import RemotingCommand, ResponseTemplate, TemplatedResponse

VARIABLE = ("msgId", "queueId", "queueOffset")
text = st.text(max_size=12)


def _pair(const: dict[str, str], values: tuple[str, str, str], opaque: int,
          st_type: int = SerializeType.JSON) -> tuple[RemotingCommand, TemplatedResponse]:
    ext = dict(zip(VARIABLE, values, strict=True)) | const
    plain = RemotingCommand(0, 0, 409, opaque, 1, None, dict(ext), b"", st_type)
    templ = TemplatedResponse(0, 0, 409, opaque, 1, None, dict(ext), b"", st_type)
    templ.template = ResponseTemplate(const, VARIABLE)
    return plain, templ


@settings(max_examples=60, deadline=None)
@given(region=text, trace=text, values=st.tuples(text, text, text),
       opaque=st.integers(-(1 << 31), (1 << 31) - 1))
def test_template_matches_generic_json(region: str, trace: str, values: tuple[str, str, str],
                                       opaque: int) -> None:
    plain, templ = _pair({"MSG_REGION": region, "TRACE_ON": trace}, values, opaque)
    assert templ.encode() == plain.encode()
    back = RemotingCommand.decode(templ.encode()[4:])
    assert back.opaque == opaque and back.ext_fields == plain.ext_fields


def test_changed_response_falls_back_to_the_generic_encoder() -> None:
    const = {"MSG_REGION": "R", "TRACE_ON": "true"}
    plain, templ = _pair(const, ("A1", "0", "7"), 5)
    templ.code = plain.code = 10  # FLUSH_DISK_TIMEOUT set after the fact
    assert templ.encode() == plain.encode()
    plain, templ = _pair(const, ("A1", "0", "7"), 5, SerializeType.MSGPACK)
    assert templ.encode() == plain.encode()
    plain, templ = _pair(const, ("A1", "0", "7"), 5)
    templ.ext_fields["extra"] = plain.ext_fields["extra"] = "x"  # type: ignore[index]
    assert templ.encode() == plain.encode()


plain_text = st.text(alphabet="0123456789ABCDEF-", max_size=34)


@settings(max_examples=60, deadline=None)
@given(region=text, values=st.tuples(plain_text, plain_text, plain_text),
       opaque=st.integers(-(1 << 31), (1 << 31) - 1))
def test_plain_values_frame_is_the_escaped_frame(region: str, values: tuple[str, str, str],
                                                 opaque: int) -> None:
    """frame_plain (no escaping pass, for ids and numbers) writes what frame() writes."""
    tpl = ResponseTemplate({"MSG_REGION": region, "TRACE_ON": "true"}, VARIABLE)
    for st_type in (SerializeType.JSON, SerializeType.MSGPACK):
        assert tpl.frame_plain(st_type, opaque, values) == tpl.frame(st_type, opaque, values)
    plain, _ = _pair({"MSG_REGION": region, "TRACE_ON": "true"}, values, opaque)
    assert tpl.frame_plain(SerializeType.JSON, opaque, values) == plain.encode()


PULL_KEYS = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")


@settings(max_examples=60, deadline=None)
@given(remark=text, const=text, values=st.tuples(plain_text, plain_text, plain_text, plain_text),
       opaque=st.integers(-(1 << 31), (1 << 31) - 1))
def test_plain_frame_with_unsorted_keys_and_a_remark_is_the_escaped_frame(
    remark: str, const: str, values: tuple[str, str, str, str], opaque: int
) -> None:
    """frame_plain's %-template puts each value under its own key whatever order `variable`
    has, and a '%' (or a brace) in a constant or the remark stays text."""
    tpl = ResponseTemplate({"zz%": const, "a{}": "%d%s"}, PULL_KEYS, remark or None)
    assert tpl.frame_plain(SerializeType.JSON, opaque, values) == tpl.frame(
        SerializeType.JSON, opaque, values)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(remark=text, values=st.tuples(text, text, text, text), body=st.binary(max_size=64),
       opaque=st.integers(-(1 << 31), (1 << 31) - 1))
def test_template_with_remark_and_body_matches_generic_json(
    remark: str, values: tuple[str, str, str, str], body: bytes, opaque: int
) -> None:
    ext = dict(zip(PULL_KEYS, values, strict=True))
    plain = RemotingCommand(0, 0, 409, opaque, 1, remark, dict(ext), body)
    templ = TemplatedResponse(0, 0, 409, opaque, 1, remark, dict(ext), body)
    templ.template = ResponseTemplate({}, PULL_KEYS, remark=remark)
    assert templ.encode() == plain.encode()
    back = RemotingCommand.decode(templ.encode()[4:])
    assert (back.remark, back.ext_fields, bytes(back.body)) == (remark or None, ext, body)
    tpl = ResponseTemplate({}, PULL_KEYS, remark=remark)
    for st_type in (SerializeType.JSON, SerializeType.MSGPACK):  # the frame without a body
        bare = RemotingCommand(0, 0, 409, opaque, 1, remark, dict(ext), b"", st_type)
        assert tpl.frame(st_type, opaque, values) == bare.encode()
    templ.remark = "OTHER" if remark != "OTHER" else "ELSE"  # not the template's: generic
    plain.remark = templ.remark
    assert templ.encode() == plain.encode()
