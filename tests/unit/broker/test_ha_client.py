"""The slave's HAClient over a real loopback socket: when it connects again after a drop."""

from __future__ import annotations

import select
import socket
from typing import Any

from actors.broker.ha import RECONNECT_MS, REDIAL_MS, HAClient
from store.message_store import DefaultMessageStore
from tests.unit.store.store_helpers import open_store, small_config


def _slave_store(root: str) -> DefaultMessageStore:
    return open_store(small_config(root, brokerRole="SLAVE"))


def test_a_dropped_connection_is_redialled_sooner_than_a_failed_connect(tmp_path: Any) -> None:
    """HAClient: after closeMaster the next loop connects again (here within REDIAL_MS); only a
    connect that fails waits RECONNECT_MS."""
    store = _slave_store(str(tmp_path / "s"))
    lst = socket.create_server(("127.0.0.1", 0))
    client = HAClient(store)
    try:
        client.set_master(f"127.0.0.1:{lst.getsockname()[1]}", 0)
        client.tick(0)  # connects and reports
        assert select.select([lst], [], [], 5)[0]
        conn, _ = lst.accept()
        assert conn.recv(8) == (0).to_bytes(8, "big")  # the first report: an empty slave
        conn.close()  # the master drops it
        assert select.select(client.fds(), [], [], 5)[0]
        client.on_ready(1000)
        assert client.fds() == [] and client.next_connect_ms == 1000 + REDIAL_MS
        port = lst.getsockname()[1]
        lst.close()  # nobody listens any more: the connect fails
        t = 1000 + REDIAL_MS
        client.tick(t)
        if client.fds():  # a non-blocking connect refused later: seen once the socket is ready
            assert select.select([], client.fds(), [], 5)[1]
            client.tick(t)
        assert client.fds() == [] and client.next_connect_ms == t + RECONNECT_MS
        assert client.master.endswith(str(port))
    finally:
        client.close()
        lst.close()
        store.shutdown(0)
