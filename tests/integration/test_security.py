"""Only the ports the user asked for listen beyond loopback (Thespian's stay on 127.0.0.1)."""

from __future__ import annotations

import re

import pytest

from deploy import procinfo

pytestmark = pytest.mark.integration


def test_only_requested_ports_face_the_network(up_process) -> None:
    up = up_process(host="0.0.0.0")
    up.wait_ready()
    listeners = procinfo.listeners_of(up.pids())
    ports = {port for _pid, _ip, port in listeners}
    assert {up.ns_port, up.broker_port} <= ports
    assert len(listeners) >= 4  # admin + actor ports + the client ports
    exposed = {(ip, port) for _pid, ip, port in listeners if not ip.startswith("127.")}
    log_text = (up.out_path.parent / "data" / "actormq.log").read_text(errors="replace")
    # the broker's VIP channel (spec §1.1) listens on broker_port - 2 (the broker refuses to
    # start when it is taken),
    # a master's HA service (spec §10) on broker_port + 1 (or a free port when that was taken)
    vip = ("0.0.0.0", up.broker_port - 2)
    ha_ports = {int(p) for p in re.findall(r"HA service listening on 0\.0\.0\.0:(\d+)", log_text)}
    assert len(ha_ports) == 1, log_text[-2000:]
    ha = ("0.0.0.0", ha_ports.pop())
    assert exposed == {vip, ("0.0.0.0", up.ns_port), ("0.0.0.0", up.broker_port), ha}, listeners


def test_loopback_host_exposes_nothing(up_process) -> None:
    up = up_process(host="127.0.0.1")
    up.wait_ready()
    listeners = procinfo.listeners_of(up.pids())
    assert listeners
    assert all(ip.startswith("127.") for _pid, ip, _port in listeners), listeners
