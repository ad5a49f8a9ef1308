"""The send core's fast path (fast_path, taken by the processor host) answers and stores byte
for byte what the general path (decode + process + encode) does, and takes only what it may."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import msgpack
import pytest
from broker_kit import Broker, FastPathSide, send_ext

from actors.runtime import processor_host
from actors.runtime.channel import RecordDecoder
from protocol.codes import SerializeType
from protocol.command import RemotingCommand

NOW = 1_700_000_000_000
J, M = int(SerializeType.JSON), int(SerializeType.MSGPACK)


class Side(FastPathSide):
    """One broker driven through a ProcessorHost, with or without the send fast path."""

    def __init__(self, root: str, fast: bool) -> None:
        super().__init__(Broker(root), "send", fast)
        self.core.rng = random.Random(7)

    def run(self, frame: bytes, now_ms: int = NOW) -> bytes:
        """Handle one request frame at now_ms."""
        return super().run(frame, now_ms)

    def stored(self) -> tuple[bytes, list[Any]]:
        """The commit log (one 1 MiB file holds it all) and every consume-queue unit."""
        store = self.broker.store
        units = []
        for key in sorted(store.consume_queues):
            cq = store.consume_queues[key]
            units += [(key, cq.get_unit(i)) for i in range(cq.get_max_offset_in_queue())]
        return bytes(store.commitlog.current_file.mm[: store.max_phy_offset]), units


@pytest.fixture
def sides(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Side, Side]]:
    clock = SimpleNamespace(monotonic_ns=time.monotonic_ns, time_ns=lambda: NOW * 1_000_000,
                            sleep=time.sleep)
    monkeypatch.setattr(processor_host, "time", clock)  # one store time on both sides
    fast, slow = Side(str(tmp_path / "fast"), True), Side(str(tmp_path / "slow"), False)
    yield fast, slow
    fast.close()
    slow.close()


def frame(ext: dict[str, Any] | None, st: int, *, flag: int = 0, opaque: int = 11,
          code: int = 310, body: bytes = b"hello") -> bytes:
    """A request frame without its length prefix; ext values as strings, like clients send."""
    ext = None if ext is None else {k: str(v).lower() if isinstance(v, bool) else str(v)
                                    for k, v in ext.items()}
    cmd = RemotingCommand(code, 0, 409, opaque, flag, None, ext, body, st)
    return cmd.encode()[4:]


JAVA_PROPS = "KEYS\x01k1\x02UNIQ_KEY\x01U1\x02WAIT\x01false\x02TAGS\x01TagA\x02"
# (description, ext changes, how many of the two sends the fast path takes)
CASES: list[tuple[str, dict[str, Any], int]] = [
    ("plain", {}, 2),
    ("java props, trailing separator", {"i": JAVA_PROPS}, 2),
    ("WAIT first", {"i": "WAIT\x01true\x02TAGS\x01a"}, 2),
    ("WAIT in the middle", {"i": "TAGS\x01a\x02WAIT\x01true\x02KEYS\x01b"}, 2),
    ("WAIT alone", {"i": "WAIT\x01true"}, 2),
    ("non-ASCII tag", {"i": "TAGS\x01\u6807\u7b7e\x02WAIT\x01true"}, 2),
    ("WAIT-like name", {"i": "XWAIT\x01true\x02WAITX\x01y"}, 2),
    ("no properties key", {"i": None}, 2),
    ("empty properties", {"i": ""}, 2),
    ("value holding a name separator", {"i": "TAGS\x01a\x01b"}, 2),
    ("random queue", {"e": -1}, 2),
    ("duplicate names", {"i": "TAGS\x01a\x02TAGS\x01b"}, 0),
    ("empty value", {"i": "TAGS\x01\x02KEYS\x01k"}, 0),
    ("double separator", {"i": "TAGS\x01a\x02\x02"}, 0),
    ("CLUSTER given", {"i": "CLUSTER\x01x\x02TAGS\x01a"}, 0),
    ("transaction", {"i": "TRAN_MSG\x01true\x02TAGS\x01a"}, 0),
    ("transaction false", {"i": "TRAN_MSG\x01false"}, 0),
    ("illegal queue", {"e": 99}, 0),
    ("unknown topic (then auto-created)", {"b": "Fresh"}, 1),
    ("retry topic", {"b": "%RETRY%G1", "j": 1}, 0),
    ("bad topic name", {"b": "a b"}, 0),
    ("batch flag", {"m": True}, 0),
    ("missing field", {"h": None}, 0),
    # numbers as Integer.parseInt reads them: a sign or another decimal digit is a number,
    # a space or an underscore is an error answered by the general path (SYSTEM_ERROR)
    ("signed numbers", {"e": "+1", "h": "-3"}, 2),
    ("fullwidth digit", {"e": "\uff11"}, 2),
    ("space in a number", {"e": " 1"}, 0),
    ("underscore in a number", {"g": "1_700_000_000_000"}, 0),
    ("digit beyond the BMP", {"e": "\U0001d7cf"}, 0),
]


@pytest.mark.parametrize("st", [J, M])
@pytest.mark.parametrize(("name", "change", "taken"), CASES, ids=[c[0] for c in CASES])
def test_fast_path_answers_and_stores_like_the_general_path(
    sides: tuple[Side, Side], st: int, name: str, change: dict[str, Any], taken: int
) -> None:
    fast, slow = sides
    first = frame(send_ext("T", queue_id=1), st)  # creates T through the general path
    assert fast.run(first, NOW) == slow.run(first, NOW)
    assert fast.taken == 0
    ext = send_ext("T", queue_id=1)
    for k, v in change.items():
        if v is None:
            ext.pop(k, None)
        else:
            ext[k] = v
    for i in range(2):  # the second time the topic checks are cached
        req = frame(ext, st, opaque=100 + i)
        got = fast.run(req, NOW + 1 + i)
        assert got == slow.run(req, NOW + 1 + i), name
        assert RecordDecoder().feed(got), name  # something was answered
    assert fast.taken == taken
    assert fast.stored() == slow.stored()
    # the same stats counts (topic -> messages, bytes, calls): the fast path counts its puts
    assert fast.core._puts == slow.core._puts and fast.core._puts["T"][0] >= 1


@pytest.mark.parametrize("st", [J, M])
def test_not_taken_oneway_other_codes_and_serialize_types(sides: tuple[Side, Side],
                                                          st: int) -> None:
    fast, slow = sides
    ext = send_ext("T", queue_id=0)
    fast.run(frame(ext, st), NOW)
    slow.run(frame(ext, st), NOW)
    for req in (frame(ext, st, flag=2),  # oneway: stored, never answered
                frame(ext, st, code=10),  # SEND_MESSAGE: long key names
                frame(ext, int(SerializeType.ROCKETMQ)),
                frame(ext, st, flag=1)):  # a response: ignored
        assert fast.run(req, NOW + 1) == slow.run(req, NOW + 1)
    assert fast.taken == 0
    assert fast.stored() == slow.stored()


def test_malformed_msgpack_ext_closes_the_connection_on_both_paths(
    sides: tuple[Side, Side]
) -> None:
    fast, slow = sides
    ext = send_ext("T", queue_id=0)
    fast.run(frame(ext, M), NOW)
    slow.run(frame(ext, M), NOW)
    header = msgpack.packb([310, 0, 409, 5, 0, None, ext])  # numbers, not strings, in ext
    req = (len(header) | (M << 24)).to_bytes(4, "big") + header + b"body"
    out = fast.run(req, NOW + 1)
    assert out == slow.run(req, NOW + 1)
    assert RecordDecoder().feed(out)[0][0] == 4  # CLOSE_CONN
    assert fast.taken == 0


@pytest.mark.parametrize("st", [J, M])
def test_store_failure_in_fast_path_is_system_error(sides: tuple[Side, Side], st: int) -> None:
    fast, slow = sides
    ext = send_ext("T", queue_id=0)
    fast.run(frame(ext, st), NOW)
    slow.run(frame(ext, st), NOW)

    def boom(*_args: Any) -> Any:
        raise OSError("disk gone")

    for side in sides:  # the general path puts a message, the fast path its fields
        side.broker.store.put_message = boom  # type: ignore[method-assign]
        side.broker.store.put_message_fields = boom  # type: ignore[method-assign]
    req = frame(ext, st, opaque=77)
    out = fast.run(req, NOW + 1)
    assert out == slow.run(req, NOW + 1)
    (rec,) = RecordDecoder().feed(out)
    resp = RemotingCommand.decode(rec[2][4:])
    assert (resp.code, resp.opaque, resp.serialize_type) == (1, 77, st)
    assert "disk gone" in (resp.remark or "")
    assert fast.host.errors == slow.host.errors == 1
