"""What every `actormq admin` command uses: one request to a server, and route look-ups.

Mirrors tools/admin/DefaultMQAdminExt.java (examineBrokerClusterInfo, examineTopicRouteInfo and
the request plumbing under it), RocketMQ 4.9.x.
"""

from __future__ import annotations

import argparse
import select
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, TypeVar

from actors.client import client_requests as rq
from actors.client.client_requests import ClientRequest
from actors.client.errors import MQClientError
from actors.runtime.tls import TlsConfig
from deploy.wire import BlockingClient
from protocol.acl import SessionCredentials
from protocol.bodies import (
    ClusterInfo,
    TopicRouteData,
    loads_lenient,
    loads_object_map,
)
from protocol.codes import RequestCode as RC
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError, ProtocolError
from protocol.headers.by_code import REQUEST_HEADERS

EXIT_FAILED = 1
EXIT_USAGE = 2
RPC_TIMEOUT_S = 10.0
T = TypeVar("T")


class AdminError(Exception):
    """A server refused or could not be reached: printed, exit code 1."""


def echo(text: str = "") -> None:
    sys.stdout.write(text + "\n")


@dataclass
class ClientSettings:
    """What this CLI's connections carry, set once by `actormq admin` from its options and
    environment: the ACL credentials requests are signed with (None: unsigned) and the TLS
    settings (None: plain)."""

    credentials: SessionCredentials | None = None
    tls: TlsConfig | None = None

    @property
    def access_key(self) -> str | None:
        return None if self.credentials is None else self.credentials.access_key

    @property
    def secret_key(self) -> str | None:
        return None if self.credentials is None else self.credentials.secret_key


CLIENT = ClientSettings()

IDLE_KEPT = 8  # idle connections kept per server


@dataclass
class ConnectionPool:
    """Connections to each server kept open between requests, as DefaultMQAdminExt keeps its
    channels: the console asks a broker hundreds of things per page. A connection is checked
    out by one request at a time (any thread) and closed, never returned, after any error;
    at most IDLE_KEPT idle ones per server."""

    idle: dict[tuple[str, TlsConfig | None], list[BlockingClient]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        return self.invoke_many(addr, [cmd], timeout_s)[0]

    def invoke_many(self, addr: str, cmds: list[RemotingCommand],
                    timeout_s: float) -> list[RemotingCommand]:  # fmt: skip
        """`cmds` written at once on one connection, their answers in order; the connection
        is kept afterwards. A kept connection is used only when nothing arrived on it while it
        was idle (the server's close shows as readable); nothing is ever sent twice, so a
        failure after the write is the caller's, as it is for a fresh connection."""
        key = (addr, CLIENT.tls)
        cl = self._kept(key) or BlockingClient(addr, tls=CLIENT.tls)
        try:
            answers = cl.invoke_many(cmds, timeout_s)
        except BaseException:
            cl.close()
            raise
        self._keep(key, cl)
        return answers

    def _kept(self, key: tuple[str, TlsConfig | None]) -> BlockingClient | None:
        """An idle connection to the server that is still open, if there is one."""
        while True:
            with self.lock:
                kept = self.idle.get(key)
                cl = kept.pop() if kept else None
            if cl is None:
                return None
            sock = cl.sock
            try:
                alive = sock is not None and not select.select([sock], [], [], 0)[0]
            except (OSError, ValueError):
                alive = False
            if alive:
                return cl
            cl.close()  # closed by the server (or answered something unasked): not reused

    def _keep(self, key: tuple[str, TlsConfig | None], cl: BlockingClient) -> None:
        with self.lock:
            kept = self.idle.setdefault(key, [])
            if len(kept) < IDLE_KEPT:
                kept.append(cl)
                return
        cl.close()

    def close(self) -> None:
        with self.lock:
            conns = [c for kept in self.idle.values() for c in kept]
            self.idle.clear()
        for c in conns:
            c.close()


POOL = ConnectionPool()


def call(addr: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b"",
         ok: tuple[int, ...] = (0,)) -> RemotingCommand:
    """One request (on a kept connection when there is one); AdminError unless the code is in
    `ok`."""
    fields = {k: str(v) for k, v in (ext or {}).items() if v is not None}
    return invoke(addr, RemotingCommand.request(code, request_fields(code, fields) or None,
                                                body), ok)  # fmt: skip


def request_fields(code: int, fields: dict[str, str]) -> dict[str, str]:
    """The extFields of request `code` built by its typed header (protocol.headers, the one
    the clients send and the broker reads) when it has one: a misspelled, missing or
    malformed field is an AdminError here, not a request the server refuses or
    misreads."""
    cls = REQUEST_HEADERS.get(code)
    if cls is None:
        return fields
    unknown = fields.keys() - {spec.key for spec in cls.FIELDS}
    if unknown:
        raise AdminError(f"{RC(code).name}: no header field {', '.join(sorted(unknown))}")
    try:
        return cls.from_ext(fields).to_ext()
    except HeaderFieldError as exc:
        raise AdminError(f"{RC(code).name}: {exc.remark}") from None


def invoke(addr: str, cmd: RemotingCommand, ok: tuple[int, ...] = (0,)) -> RemotingCommand:
    """`cmd`, signed when the CLI has credentials, sent to `addr`; AdminError unless the
    answer's code is in `ok`."""
    resp = _exchange(addr, cmd)
    if resp.code not in ok:
        raise AdminError(f"{addr} answered code {resp.code}: {resp.remark or ''}")
    return resp


def _exchange(addr: str, cmd: RemotingCommand) -> RemotingCommand:
    if CLIENT.credentials is not None:
        CLIENT.credentials.sign(cmd)
    try:
        return POOL.invoke(addr, cmd, RPC_TIMEOUT_S)
    except (OSError, TimeoutError, ProtocolError) as exc:
        raise AdminError(f"{addr}: {exc}") from None


def ask(addr: str, req: ClientRequest[T]) -> T:
    """One of the clients' requests (actors.client.client_requests: built as MQClientAPI
    builds it), sent as invoke sends, its answer read by the clients' own parse; AdminError
    when that parse refuses the answer."""
    resp = _exchange(addr, req.command())
    try:
        return req.parse(resp, addr)
    except MQClientError:
        raise AdminError(f"{addr} answered code {resp.code}: {resp.remark or ''}") from None


def invoke_all(addr: str, cmds: list[RemotingCommand],
               ok: tuple[int, ...] = (0,)) -> list[RemotingCommand]:  # fmt: skip
    """`cmds` pipelined to `addr` on one connection (signed as invoke signs); their answers in
    order; AdminError when any answer's code is not in `ok`."""
    if not cmds:
        return []
    if CLIENT.credentials is not None:
        for cmd in cmds:
            CLIENT.credentials.sign(cmd)
    try:
        answers = POOL.invoke_many(addr, cmds, RPC_TIMEOUT_S)
    except (OSError, TimeoutError, ProtocolError) as exc:
        raise AdminError(f"{addr}: {exc}") from None
    for resp in answers:
        if resp.code not in ok:
            raise AdminError(f"{addr} answered code {resp.code}: {resp.remark or ''}")
    return answers


def header_int(resp: RemotingCommand, name: str) -> int:
    """An integer field of a response's header; AdminError when it is missing or not a number."""
    raw = (resp.ext_fields or {}).get(name)
    try:
        return int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AdminError(f"the answer has no integer {name!r} (got {raw!r})") from None


def cluster_info(ns: str) -> ClusterInfo:
    return ClusterInfo.from_json(bytes(call(ns, RC.GET_BROKER_CLUSTER_INFO).body))


def topic_names(ns: str) -> list[str]:
    """fetchAllTopicList: every topic the name server knows, sorted."""
    body = loads_lenient(bytes(call(ns, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body or b"{}"))
    return sorted(str(t) for t in (body.get("topicList", []) if isinstance(body, dict) else []))


def topic_route_or_none(ns: str, topic: str) -> TopicRouteData | None:
    """The topic's route, None when the name server has none (TOPIC_NOT_EXIST)."""
    return ask(ns, rq.topic_route(topic))


def topic_route(ns: str, topic: str) -> TopicRouteData:
    route = topic_route_or_none(ns, topic)
    if route is None:
        raise AdminError(f"topic {topic!r} has no route on {ns} (TOPIC_NOT_EXIST)")
    return route


def cluster_masters(info: ClusterInfo, cluster: str | None) -> list[tuple[str, str]]:
    """(brokerName, master address) of a cluster (every cluster when None)."""
    names = (
        info.cluster_addr_table.get(cluster, []) if cluster is not None
        else sorted(info.broker_addr_table)
    )  # fmt: skip
    out = []
    for name in names:
        bd = info.broker_addr_table.get(name)
        if bd is not None and bd.master_addr:
            out.append((name, bd.master_addr))
    if not out:
        raise AdminError(f"no master broker found for cluster {cluster!r}")
    return out


def route_masters(route: TopicRouteData) -> dict[str, str]:
    return {bd.broker_name: bd.master_addr for bd in route.broker_datas if bd.master_addr}


def json_object(resp: RemotingCommand) -> dict[str, Any]:
    """A JSON object body, or ValueError (reported as an unreadable reply)."""
    body = loads_lenient(bytes(resp.body))
    if not isinstance(body, dict):
        raise ValueError("the body is not a JSON object")
    return body


def offset_table(resp: RemotingCommand) -> list[tuple[Any, Any]]:
    """The offsetTable member of a ConsumeStats / ResetOffsetBody reply: a map keyed by
    MessageQueue objects as fastjson writes it, read as (queue, value) pairs."""
    text = as_text(resp.body)
    at = text.find('"offsetTable":')
    if at < 0:
        return []
    return loads_object_map(text, at + len('"offsetTable":'))[0]


def as_text(b: Any) -> str:
    return bytes(b).decode("utf-8", "replace")


class Usage(Exception):
    """A bad argument found after parsing: exit code 2."""



def targets(a: argparse.Namespace, *, require: bool = False) -> list[tuple[str, str]]:
    """(name, address) of the -b broker, else of every master of the -c cluster (of every
    cluster when no -c is given, unless `require` asks for one of the two)."""
    if getattr(a, "broker", None):
        return [(a.broker, a.broker)]
    cluster = getattr(a, "cluster", None)
    if require and not cluster:
        raise Usage("pass -c cluster or -b broker address")
    return cluster_masters(cluster_info(a.namesrv), cluster)



def group_broker(a: argparse.Namespace) -> str:
    """-b if given, else the master of the group's retry topic, else the first master."""
    if getattr(a, "broker", None):
        return str(a.broker)
    try:
        masters = route_masters(topic_route(a.namesrv, f"%RETRY%{a.group}"))
        if masters:
            return sorted(masters.values())[0]
    except AdminError:
        pass
    return cluster_masters(cluster_info(a.namesrv), None)[0][1]
