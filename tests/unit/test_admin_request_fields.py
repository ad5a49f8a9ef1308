"""The admin tools' requests are built by the typed headers the clients send and the broker
reads (deploy.admin_ext.request_fields): the same extFields for a good request, and a
misspelled, missing or malformed field refused before anything is sent."""

from __future__ import annotations

import pytest

from deploy.admin_ext import AdminError, request_fields
from protocol.codes import RequestCode as RC


def test_a_good_request_keeps_its_fields() -> None:
    fields = {"consumerGroup": "g", "topic": "T", "queueId": "1", "commitOffset": "7"}
    assert request_fields(RC.UPDATE_CONSUMER_OFFSET, fields) == fields
    reset = {"topic": "T", "group": "g", "timestamp": "-1", "isForce": "true"}
    assert request_fields(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset) == reset


@pytest.mark.parametrize(("code", "fields", "says"), [
    (RC.GET_CONSUME_STATS, {"consumerGroupp": "g"}, "no header field consumerGroupp"),
    (RC.GET_MAX_OFFSET, {"topic": "T"}, "queueId"),
    (RC.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T", "queueId": "x", "timestamp": "1"},
     "queueId"),
])  # fmt: skip
def test_a_bad_request_is_refused_before_it_is_sent(code: int, fields: dict[str, str],
                                                    says: str) -> None:  # fmt: skip
    with pytest.raises(AdminError, match=says):
        request_fields(code, fields)


def test_codes_without_a_header_class_pass_as_given() -> None:
    fields = {"accessKey": "someone1", "secretKey": "secret12"}
    assert request_fields(RC.UPDATE_AND_CREATE_ACL_CONFIG, fields) == fields
