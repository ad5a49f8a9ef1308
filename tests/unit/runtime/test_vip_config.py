"""BrokerConfig.fastListenPort (the VIP port) parses from broker.conf and reaches StartRemoting."""

from __future__ import annotations

import pytest

from actors.broker.config import BrokerConfig
from actors.runtime.messages import BrokerStarted, RemotingReady, StartRemoting


def test_fast_listen_port_defaults_to_derived() -> None:
    assert BrokerConfig.from_properties({"listenPort": "10911"}).fastListenPort is None


@pytest.mark.parametrize(("raw", "want"), [("10909", 10909), ("-1", -1), ("0", 0), ("", None)])
def test_fast_listen_port_parses(raw: str, want: int | None) -> None:
    assert BrokerConfig.from_properties({"fastListenPort": raw}).fastListenPort == want


def test_bad_fast_listen_port_names_the_key() -> None:
    with pytest.raises(ValueError, match="fastListenPort"):
        BrokerConfig.from_properties({"fastListenPort": "nine"})


def test_messages_carry_the_fast_port() -> None:
    assert StartRemoting("h", 1, {}, {}, "admin").fast_port is None
    assert StartRemoting("h", 1, {}, {}, "admin", 1.0, 10, 7).fast_port == 7
    assert RemotingReady(5).fast_port == 0 and RemotingReady(5, 3).fast_port == 3
    assert BrokerStarted("h:5", 5).fast_port == 0


def test_processor_channel_parses_and_rejects_unknown_values() -> None:
    assert BrokerConfig.from_properties({}).processorChannel == "unix"
    assert BrokerConfig.from_properties({"processorChannel": "TCP"}).processorChannel == "tcp"
    with pytest.raises(ValueError, match="processorChannel"):
        BrokerConfig.from_properties({"processorChannel": "carrier-pigeon"})
