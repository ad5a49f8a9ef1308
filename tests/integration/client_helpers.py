"""Helpers for the client tests: clusters shared by a module, raw pulls to check what is stored.

The clusters are started the way `actormq up` starts them (deploy.launch: a name server and a
real broker in one actor system, small store files) or are the reference RocketMQ 4.9.8
(deploy.reference); every process is stopped by PID afterwards. The checks read the brokers
with the raw wire client (deploy.wire), never through the client under test.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy import launch
from deploy.wire import BlockingClient
from protocol.bodies import TopicRouteData
from protocol.message import MessageExt, decode_messages
from tests.integration.conftest import cluster_pids, kill_pids, wait_gone
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    SMALL_STORE,
    get_route,
    heartbeat_cmd,
    pull_cmd,
    simple_cmd,
)

log = logging.getLogger(__name__)

# a half message is checked 1 s after it was stored, every second (defaults: 6 s / 60 s)
TX_FAST = {"transactionTimeOut": "1000", "transactionCheckInterval": "1000"}


@dataclass
class Target:
    """A running cluster the client tests send to."""

    name: str
    namesrv: str
    brokers: dict[str, str] = field(default_factory=dict)  # brokerName -> host:port
    handle: Any = None  # what stops it
    pids: list[int] = field(default_factory=list)

    def broker_addr(self, name: str | None = None) -> str:
        """A broker's address (the only one when name is None)."""
        return self.brokers[name] if name else next(iter(self.brokers.values()))


def start_actormq(base: Path, brokers: tuple[str, ...] = ("broker-a",),
                  **props: str) -> Target:  # fmt: skip
    """A name server + one real broker per name, each broker in its own actor system (so one
    can be killed alone)."""
    systems: list[launch.LocalCluster] = []
    target = Target("actormq", "", handle=systems)
    try:
        for i, name in enumerate(brokers):
            data = str(base / f"{name}-{i}")
            cl = launch.start_system(data)
            systems.append(cl)
            if i == 0:
                ns_port = launch.start_namesrv(cl, port=0)
                target.namesrv = f"127.0.0.1:{ns_port}"
            merged = dict(SMALL_STORE, listenPort="0", brokerName=name,
                          storePathRootDir=os.path.join(data, "store"),
                          namesrvAddr=target.namesrv)
            merged.update(props)
            from actors.broker.config import BrokerConfig
            from store.config import StoreConfig

            port = launch.start_broker(cl, BrokerConfig.from_properties(merged),
                                       StoreConfig.from_properties(merged))
            target.brokers[name] = f"127.0.0.1:{port}"
            target.pids += cluster_pids(cl)
        wait_registered(target)
    except BaseException:
        stop_actormq(target)
        raise
    return target


def stop_actormq(target: Target) -> list[int]:
    """Stop every system of the target (by PID after a bounded wait); the survivors.

    Every broker is stopped before any actor system shuts down (after one ActorSystem of this
    process shut down, a second one in the same process no longer hears its actors' replies),
    the name server's system last."""
    import shutil

    from actors.runtime.messages import BrokerStopped, StopBroker

    systems = [cl for cl in reversed(target.handle) if not cl.stopped]
    pids = sorted({p for cl in systems for p in cluster_pids(cl)} | set(target.pids))
    for cl in systems:
        for name, (addr, _port) in cl.brokers.items():
            cl.asys.tell(addr, StopBroker())
            if launch._await(cl.asys, (BrokerStopped,), launch.STOP_TIMEOUT_S) is None:
                log.warning("broker %s did not confirm shutdown", name)
    for cl in systems:
        cl.stopped = True
        try:
            cl.asys.shutdown()
        finally:
            shutil.rmtree(cl.runtime_dir, ignore_errors=True)
    left = wait_gone(pids, 15.0)
    kill_pids(left)
    return left


def system_pids(target: Target, index: int) -> list[int]:
    """The processes of one broker's actor system."""
    return cluster_pids(target.handle[index])


def wait_registered(target: Target, timeout_s: float = 30.0) -> None:
    """Until every broker is in the name server's cluster info (bounded)."""
    deadline = time.monotonic() + timeout_s
    host, port = target.namesrv.split(":")
    while time.monotonic() < deadline:
        with BlockingClient((host, int(port))) as c:
            r = c.invoke(simple_cmd(106), RPC_TIMEOUT_S)  # GET_BROKER_CLUSTER_INFO
        if r.code == 0 and all(a.split(":")[1].encode() in bytes(r.body)
                               for a in target.brokers.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"brokers {target.brokers} never registered with {target.namesrv}")


def start_reference(base: Path, **extra: str) -> Target:
    """The reference RocketMQ 4.9.8 (name server + broker-a)."""
    from deploy import reference

    ref = reference.reference_cluster(str(base / "ref"), extra_conf=extra).start()
    return Target("reference", ref.namesrv_addr(), {"broker-a": ref.broker_addr()}, ref)


def route_of(target: Target, topic: str) -> TopicRouteData | None:
    """The topic's route from the name server (None when it has none)."""
    host, port = target.namesrv.split(":")
    r = get_route((host, int(port)), topic)
    return TopicRouteData.from_json(bytes(r.body)) if r.code == 0 else None


def read_queue(addr: str, group: str, topic: str, queue_id: int, start: int = 0,
               limit: int = 100_000) -> list[MessageExt]:  # fmt: skip
    """Every message stored in one queue from `start` (raw pulls, no long polling)."""
    host, port = addr.split(":")
    out: list[MessageExt] = []
    with BlockingClient((host, int(port))) as c:
        c.invoke(heartbeat_cmd(f"checker@{os.getpid()}", group, {topic: "*"}), RPC_TIMEOUT_S)
        offset = start
        for _ in range(limit):
            r = c.invoke(pull_cmd(group, topic, queue_id, offset, max_nums=32), RPC_TIMEOUT_S)
            if r.code != 0:
                break
            msgs = decode_messages(bytes(r.body))
            out += msgs
            nxt = int((r.ext_fields or {})["nextBeginOffset"])
            if nxt <= offset:
                break
            offset = nxt
    return out


def read_topic(target: Target, topic: str, group: str = "checker_cg",
               only: tuple[str, ...] | None = None) -> list[MessageExt]:  # fmt: skip
    """Every message of the topic on every broker of its route (or the brokers in `only`)."""
    route = route_of(target, topic)
    assert route is not None, f"{topic} has no route"
    out: list[MessageExt] = []
    for qd in route.queue_datas:
        if only is not None and qd.broker_name not in only:
            continue
        addr = target.brokers[qd.broker_name]
        for qid in range(qd.read_queue_nums):
            out += read_queue(addr, group, topic, qid)
    return out


def wait_messages(target: Target, topic: str, count: int, timeout_s: float = 20.0
                  ) -> list[MessageExt]:  # fmt: skip
    """read_topic until it holds `count` messages (bounded); the last read."""
    deadline = time.monotonic() + timeout_s
    msgs: list[MessageExt] = []
    while time.monotonic() < deadline:
        if route_of(target, topic) is not None:
            msgs = read_topic(target, topic)
            if len(msgs) >= count:
                return msgs
        time.sleep(0.2)
    return msgs


def client_pids_alive(pgids: set[int]) -> list[int]:
    """Live processes of the given process groups (a client's actor system)."""
    from actors.client.client_runtime import _alive, _pids_in_group

    return [p for g in pgids for p in _pids_in_group(g) if _alive(p)]

