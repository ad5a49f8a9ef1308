"""fastjson's object-keyed maps (Map<MessageQueue, V>): writer, reader, and garbage in."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.bodies import BodyError, dumps_object_map, loads_object_map

MQ = st.fixed_dictionaries(
    {"brokerName": st.text(max_size=8), "queueId": st.integers(0, 1 << 20),
     "topic": st.text(max_size=8)}
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(MQ, st.integers(-(1 << 62), 1 << 62)), max_size=6))
def test_round_trip(pairs: list[tuple[dict, int]]) -> None:
    text = dumps_object_map(pairs).decode()
    got, end = loads_object_map(text)
    assert got == pairs and end == len(text)


def test_shape_matches_fastjson() -> None:
    mq = {"brokerName": "b", "queueId": 0, "topic": "T"}
    assert dumps_object_map([(mq, 5)]) == b'{{"brokerName":"b","queueId":0,"topic":"T"}:5}'


def test_reads_plain_maps_and_whitespace() -> None:
    assert loads_object_map('{ "a" : 1 , {"x":2} : [3] }')[0] == [("a", 1), ({"x": 2}, [3])]


@pytest.mark.parametrize("bad", ["", "[", "{", '{"a"', '{"a":', '{"a":1', '{"a" 1}', "{1:2,,}",
                                 '{"a":1;}'])
def test_malformed_raises_body_error(bad: str) -> None:
    with pytest.raises(BodyError):
        loads_object_map(bad)


def test_random_text_only_body_error() -> None:
    rng = random.Random(7)
    alphabet = '{}[]:,"abc 0123'
    for _ in range(3000):
        text = "{" + "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
        try:
            pairs, end = loads_object_map(text)
        except BodyError:
            continue
        assert 0 < end <= len(text) and isinstance(pairs, list)
        json.dumps(pairs)  # whatever parsed is plain JSON data
