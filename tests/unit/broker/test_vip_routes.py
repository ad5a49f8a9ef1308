"""The VIP channel's port choice and route table (spec §1.1; NettyServerConfig, BrokerStartup)."""

from __future__ import annotations

import pytest

from actors.broker.processors import BROKER_PROCESSOR_GROUPS, DEFAULT_GROUP
from actors.remoting.actor import fast_port_for
from actors.remoting.router import RouteTable, fast_route_table


@pytest.mark.parametrize(("port", "configured", "want"), [
    (10911, None, 10909),  # the default: listenPort - 2
    (0, None, 0),  # tests: chosen free
    (2, None, None),  # port - 2 is no valid port: no VIP
    (1, None, None),
    (65535, None, 65533),
    (10911, 20000, 20000),  # configured explicitly
    (10911, 0, 0),
    (10911, -1, None),  # configured off
])
def test_fast_port_for(port: int, configured: int | None, want: int | None) -> None:
    assert fast_port_for(port, configured) == want


def test_fast_routes_send_pull_to_the_default_group() -> None:
    main = RouteTable({c: g.name for g in BROKER_PROCESSOR_GROUPS for c in g.codes},
                      DEFAULT_GROUP)
    fast = fast_route_table(main)
    assert main.group_for(11) == "pull"
    assert fast.group_for(11) == DEFAULT_GROUP == "admin"
    for code in (10, 310, 320, 36, 14, 15, 38, 34, 35, 12, 33, 17, 41, 9999):
        assert fast.group_for(code) == main.group_for(code), code
    assert 11 in main.by_code  # the main table is not changed
