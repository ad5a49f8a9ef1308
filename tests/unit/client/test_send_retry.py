"""SendRetry: the one retry policy of the sync and the async send (sendDefaultImpl's loop)."""

from __future__ import annotations

from actors.client.errors import (
    ClientClosedError,
    ClientErrorCode,
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from actors.client.records import MessageQueue, SendResult, SendStatus
from actors.client.send_retry import SendRetry
from protocol.codes import ResponseCode

T0 = 100.0


def result(status: SendStatus, broker: str = "b1") -> SendResult:
    return SendResult(status, "id", "off", MessageQueue("T", broker, 0), 7)


def test_an_answer_that_is_sent_ok_ends_the_send() -> None:
    r = SendRetry("T", 3, 3000, T0)
    assert r.more()
    assert r.start("b1", T0) == 3000
    assert r.answered(result(SendStatus.SEND_OK), retry_another_broker=False)


def test_failures_that_java_retries_are_retried_away_from_the_broker_before() -> None:
    """A connection refused, a timeout, an unknown broker address and a retry code: another
    attempt each, the selection told the broker of the attempt before."""
    r = SendRetry("T", 5, 3000, T0)
    errors = [RemotingConnectError("b1:1"), RemotingTimeoutError("b2:1", 10.0),
              MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, "The broker[b3] not exist"),
              MQBrokerError(ResponseCode.SYSTEM_BUSY, "busy")]  # fmt: skip
    for i, err in enumerate(errors):
        assert r.more()
        r.start(f"b{i + 1}", T0 + i / 1000)
        assert r.last_broker == f"b{i + 1}"
        assert r.failed(err)
    assert r.more()
    r.start("b5", T0)
    assert r.answered(result(SendStatus.SEND_OK, "b5"), retry_another_broker=False)
    assert r.sent_to == ["b1", "b2", "b3", "b4", "b5"]


def test_attempts_spent_give_java_s_message_with_the_last_error_as_cause() -> None:
    r = SendRetry("T", 3, 3000, T0)
    last = RemotingConnectError("b3:1")
    for b, err in (("b1", RemotingConnectError("b1:1")), ("b2", RemotingConnectError("b2:1")),
                   ("b3", last)):  # fmt: skip
        r.start(b, T0)
        assert r.failed(err)
    assert not r.more()
    out = r.outcome(T0 + 0.012)
    assert isinstance(out, MQClientError) and not isinstance(out, MQBrokerError)
    assert out.code == ClientErrorCode.CONNECT_BROKER_EXCEPTION
    assert out.message.startswith("Send [3] times, still failed, cost [12]ms, Topic: T, "
                                  "BrokersSent: ['b1', 'b2', 'b3']")  # fmt: skip
    assert out.__cause__ is last


def test_a_broker_error_java_does_not_retry_ends_the_send_with_that_error() -> None:
    r = SendRetry("T", 3, 3000, T0)
    r.start("b1", T0)
    denied = MQBrokerError(ResponseCode.MESSAGE_ILLEGAL, "the message is illegal")
    assert not r.failed(denied)
    assert r.outcome(T0) is denied


def test_a_stored_answer_that_was_not_ok_beats_a_later_error() -> None:
    """retryAnotherBrokerWhenNotStoreOK: a FLUSH_DISK_TIMEOUT answer is retried elsewhere; the
    retry failing (even with a code Java does not retry) returns that answer, as Java does."""
    r = SendRetry("T", 3, 3000, T0)
    r.start("b1", T0)
    first = result(SendStatus.FLUSH_DISK_TIMEOUT)
    assert not r.answered(first, retry_another_broker=True)
    r.start("b2", T0)
    assert not r.failed(MQBrokerError(ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"))
    assert r.outcome(T0) is first


def test_a_not_ok_answer_is_final_without_retry_another_broker_and_on_the_last_attempt() -> None:
    r = SendRetry("T", 2, 3000, T0)
    r.start("b1", T0)
    assert r.answered(result(SendStatus.SLAVE_NOT_AVAILABLE), retry_another_broker=False)
    r = SendRetry("T", 2, 3000, T0)
    r.start("b1", T0)
    assert not r.answered(result(SendStatus.SLAVE_NOT_AVAILABLE), retry_another_broker=True)
    r.start("b2", T0)
    last = result(SendStatus.FLUSH_SLAVE_TIMEOUT, "b2")
    assert r.answered(last, retry_another_broker=True)  # no attempt left: this one
    assert r.outcome(T0) is last


def test_time_spent_before_an_attempt_ends_the_call_as_call_timeout() -> None:
    r = SendRetry("T", 3, 3000, T0)
    r.start("b1", T0)
    cause = RemotingTimeoutError("b1:1", 2999.0)
    assert r.failed(cause)
    assert r.more()
    assert r.start("b2", T0 + 3.0) is None  # 3000 ms gone: no second attempt
    assert not r.more()
    out = r.outcome(T0 + 3.0)
    assert isinstance(out, MQClientError)
    assert out.code == ClientErrorCode.ACCESS_BROKER_TIMEOUT
    assert "sendDefaultImpl call timeout" in out.message and "BrokersSent: ['b1']" in out.message
    assert out.__cause__ is cause


def test_the_time_left_shrinks_with_each_attempt() -> None:
    r = SendRetry("T", 3, 3000, T0)
    assert r.start("b1", T0 + 1.0) == 2000
    r.failed(RemotingConnectError("b1:1"))
    left = r.start("b2", T0 + 2.5)
    assert left is not None and abs(left - 500) < 1e-6


def test_a_closed_client_is_not_retried() -> None:
    r = SendRetry("T", 3, 3000, T0)
    r.start("b1", T0)
    closed = ClientClosedError("producer")
    assert not r.failed(closed)
    assert r.outcome(T0) is closed


def test_one_attempt_when_the_caller_chose_the_queue() -> None:
    r = SendRetry("T", 1, 3000, T0)
    r.start("b1", T0)
    assert r.failed(RemotingConnectError("b1:1"))
    assert not r.more()
    out = r.outcome(T0)
    assert isinstance(out, MQClientError) and "Send [1] times" in out.message
