"""Remoting hot path: decode a SEND_MESSAGE_V2 request (1 KiB body), encode its response.

Per serialize type (JSON, ROCKETMQ, MSGPACK). Two cycles are measured:
- "frame": RemotingCommand.decode of the request frame + make_response + encode (the codec);
- "full": the same plus the typed V2 send header parse and SendMessageResponseHeader.to_ext.

pytest: `pytest tests/bench/test_bench_remoting.py --benchmark-enable`
script: `python -m tests.bench.test_bench_remoting [rounds]` prints median ops/s, spread and
the msgpack/JSON ratio (goal: >= 2x on the frame cycle).
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from collections.abc import Callable

import pytest

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand
from protocol.headers import SendMessageRequestHeader, SendMessageResponseHeader

log = logging.getLogger(__name__)

BODY = bytes(range(256)) * 4  # 1 KiB
SEND_HEADER = SendMessageRequestHeader(
    producer_group="please_rename_unique_group_name",
    topic="TopicTest",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=3,
    sys_flag=0,
    born_timestamp=1795303321205,
    flag=0,
    properties="KEYS\x01OrderID188\x02UNIQ_KEY\x017F0000016FD229C216E16C02C8BC0000\x02"
    "WAIT\x01true\x02TAGS\x01TagA",
    reconsume_times=0,
    unit_mode=False,
    batch=False,
)
SERIALIZE_TYPES = {
    "JSON": SerializeType.JSON,
    "ROCKETMQ": SerializeType.ROCKETMQ,
    "MSGPACK": SerializeType.MSGPACK,
}


def request_frame(serialize_type: int) -> memoryview:
    """The request as the FrameDecoder hands it over: length stripped, a memoryview."""
    cmd = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2,
        SEND_HEADER.to_ext_v2(),
        BODY,
        serialize_type=serialize_type,
        opaque=42,
    )
    return memoryview(cmd.encode())[4:]


def frame_cycle(frame: memoryview) -> bytes:
    """Decode the request, build and encode the response with prebuilt ext fields."""
    req = RemotingCommand.decode(frame)
    return req.make_response(ResponseCode.SUCCESS, None, _RESP_EXT).encode()


_RESP_EXT = SendMessageResponseHeader(
    msg_id="7F00000100002A9F0000000000000000",
    queue_id=3,
    queue_offset=1234,
    msg_region="DefaultRegion",
    trace_on="true",
).to_ext()


def full_cycle(frame: memoryview) -> bytes:
    """Decode the request and its typed header, then encode a typed response."""
    req = RemotingCommand.decode(frame)
    hdr = SendMessageRequestHeader.from_ext_v2(req.ext_fields)
    resp_hdr = SendMessageResponseHeader(
        msg_id="7F00000100002A9F0000000000000000",
        queue_id=hdr.queue_id,
        queue_offset=1234,
        msg_region="DefaultRegion",
        trace_on="true",
    )
    return req.make_response(ResponseCode.SUCCESS, None, resp_hdr.to_ext()).encode()


@pytest.mark.parametrize("name", list(SERIALIZE_TYPES))
def test_bench_frame_cycle(benchmark: pytest.FixtureDef, name: str) -> None:
    frame = request_frame(SERIALIZE_TYPES[name])
    out = benchmark(frame_cycle, frame)
    resp = RemotingCommand.decode(memoryview(out)[4:])
    assert (resp.opaque, resp.flag, resp.serialize_type) == (42, 1, SERIALIZE_TYPES[name])
    assert resp.ext_fields == _RESP_EXT


@pytest.mark.parametrize("name", list(SERIALIZE_TYPES))
def test_bench_full_cycle(benchmark: pytest.FixtureDef, name: str) -> None:
    frame = request_frame(SERIALIZE_TYPES[name])
    out = benchmark(full_cycle, frame)
    resp = RemotingCommand.decode(memoryview(out)[4:])
    assert resp.ext_fields is not None and resp.ext_fields["queueId"] == "3"


def _ops_per_s(fn: Callable[[memoryview], bytes], frame: memoryview, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn(frame)
    return n / (time.perf_counter() - t0)


def run(rounds: int = 15, per_round: int = 20_000) -> dict[tuple[str, str], list[float]]:
    """Interleaved rounds of each (cycle, serialize type); returns ops/s samples."""
    cycles = {"frame": frame_cycle, "full": full_cycle}
    frames = {name: request_frame(st) for name, st in SERIALIZE_TYPES.items()}
    samples: dict[tuple[str, str], list[float]] = {
        (c, s): [] for c in cycles for s in SERIALIZE_TYPES
    }
    for _ in range(rounds):
        for (c, s), out in samples.items():
            out.append(_ops_per_s(cycles[c], frames[s], per_round))
    return samples


def main(argv: list[str]) -> None:
    """Print median ops/s and spread per cycle and serialize type, and the msgpack/JSON ratio."""
    rounds = int(argv[0]) if argv else 15
    samples = run(rounds)
    lines = [f"remoting bench: SEND_MESSAGE_V2 1 KiB body, {rounds} rounds x 20000 ops"]
    for (c, s), xs in samples.items():
        q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
        lines.append(
            f"  {c:5s} {s:8s} median {statistics.median(xs) / 1000:7.1f} k ops/s"
            f"  (IQR {q[0] / 1000:.1f}-{q[2] / 1000:.1f}, min {min(xs) / 1000:.1f},"
            f" max {max(xs) / 1000:.1f})"
        )
    for c in ("frame", "full"):
        ratio = statistics.median(samples[(c, "MSGPACK")]) / statistics.median(samples[(c, "JSON")])
        lines.append(f"  {c:5s} msgpack/JSON ratio {ratio:.2f}x")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
