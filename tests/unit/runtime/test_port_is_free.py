"""deploy.launch.port_is_free answers what a listener's bind (SO_REUSEADDR) would meet: a port
whose only sockets are in TIME_WAIT (a killed run's) is free, a listening one is not."""

from __future__ import annotations

import socket
import time

from deploy import launch, procinfo


def test_time_wait_does_not_count_a_listener_does() -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    assert not launch.port_is_free(port)
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    server.close()
    accepted.close()  # the server's side closes first: it ends in TIME_WAIT on `port`
    client.settimeout(5)
    assert client.recv(1) == b""
    client.close()
    deadline = time.monotonic() + 5
    while procinfo.TCP_TIME_WAIT not in procinfo.tcp_states(port) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert procinfo.TCP_TIME_WAIT in procinfo.tcp_states(port)
    assert launch.port_is_free(port)


def test_the_admin_port_is_none_the_run_will_listen_on() -> None:
    """`up --namesrv-port P` (and the broker's ports) are free when the actor system picks its
    admin port, and taken a moment later: the pick never lands on them."""
    from actors.broker.config import BrokerConfig
    from store.config import StoreConfig

    taken = set(range(1100, 33000))  # every port the stable pick draws from, here
    port = launch.stable_free_port(avoid=taken)
    assert port not in taken and launch.port_is_free(port)
    one = launch.stable_free_port()
    assert launch.stable_free_port(avoid=taken - {one}, tries=400_000) == one
    bc, sc = BrokerConfig(listenPort=20911), StoreConfig(haListenPort=0)
    assert launch.broker_ports(bc, sc) == {20909, 20911, 20912}
    assert launch.broker_ports(bc, StoreConfig(haListenPort=30000)) == {20909, 20911, 30000}
    assert launch.broker_ports(bc, StoreConfig(haListenPort=-1)) == {20909, 20911}
    assert launch.broker_ports(BrokerConfig(listenPort=0), sc) == set()
