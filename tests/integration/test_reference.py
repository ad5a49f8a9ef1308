"""The reference RocketMQ 4.9.8 launcher (deploy.reference) starts, serves and stops by PID."""

from __future__ import annotations

from typing import Any

import pytest

from deploy import procinfo
from deploy.wire import BlockingClient
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand

pytestmark = pytest.mark.integration


def test_reference_cluster_serves_and_stops(reference_cluster: Any) -> None:
    with BlockingClient(reference_cluster.broker_addr()) as c:
        resp = c.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 5.0)
    assert resp.code == ResponseCode.SUCCESS
    assert b"brokerName=broker-a" in bytes(resp.body)
    pid = reference_cluster.pid()
    assert pid is not None
    reference_cluster.stop()
    assert procinfo.is_zombie(pid)
