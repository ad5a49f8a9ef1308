"""The Spark driver's side of the SparkBridge protocol: find the bridge, ask, map errors.

Mirrors client/impl/MQClientAPIImpl.java's role for the bridge's own codes (one blocking
request per call, the answer's code turned into a typed exception carrying the remark).
The bridge is the one given by the `bridge` option, else the one registered on the name
server (KV namespace ACTORMQ_SPARK, key bridgeAddr, which `actormq up` and
`actormq spark bridge` put there). Runs in the driver's planner processes only, outside any
actor system; connections are cached per process and reopened when they break.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from actors.runtime.tls import TlsConfig
from actors.spark_bridge.core import KV_KEY, KV_NAMESPACE
from actors.spark_bridge.options import SourceOptions
from actors.spark_bridge.wire import BadBody, loads, request
from deploy.wire import BlockingClient
from protocol.codes import RequestCode, ResponseCode, SparkBridgeCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.headers import GetKVConfigRequestHeader, GetKVConfigResponseHeader

log = logging.getLogger(__name__)

CALL_TIMEOUT_S: Final = 60.0  # a plan may take several rounds of lookups (5 s each at most)
NAMESRV_TIMEOUT_S: Final = 5.0
RETRY_FOR_S: Final = 10.0  # a bridge being restarted gets this long to come back

_clients: dict[tuple[str, TlsConfig | None], BlockingClient] = {}  # per process: (bridge, TLS)


class RocketMQSourceError(Exception):
    """The rocketmq source or sink cannot go on; the message says why."""


class UnknownTopicError(RocketMQSourceError):
    """A topic does not exist on the name server."""


class BadOptionsError(RocketMQSourceError):
    """An option names what the cluster does not have, or does not parse."""


class DataLossError(RocketMQSourceError):
    """Requested offsets were removed or are out of range (failOnDataLoss=true)."""


class ClusterUnreachableError(RocketMQSourceError):
    """The name server, a broker or the bridge did not answer."""


_ERRORS: Final[dict[int, type[RocketMQSourceError]]] = {
    ResponseCode.TOPIC_NOT_EXIST: UnknownTopicError,
    SparkBridgeCode.SPARK_BAD_OPTIONS: BadOptionsError,
    SparkBridgeCode.SPARK_DATA_LOSS: DataLossError,
    SparkBridgeCode.SPARK_UNREACHABLE: ClusterUnreachableError,
}


def find_bridge(opts: SourceOptions) -> str:
    """The bridge's host:port: the `bridge` option, else the name servers' KV entry."""
    if opts.bridge:
        return opts.bridge
    failures = []
    for ns in opts.name_servers:
        cmd = RemotingCommand.request(RequestCode.GET_KV_CONFIG,
                                      GetKVConfigRequestHeader(KV_NAMESPACE, KV_KEY).to_ext())
        try:
            with BlockingClient(ns, tls=opts.tls) as cl:
                resp = cl.invoke(cmd, NAMESRV_TIMEOUT_S)
        except (OSError, TimeoutError, ProtocolError) as exc:
            failures.append(f"{ns}: {exc}")
            continue
        if resp.code == ResponseCode.SUCCESS:
            value = GetKVConfigResponseHeader.from_ext(resp.ext_fields).value
            if value:
                return value
        raise ClusterUnreachableError(
            f"no SparkBridge is registered on name server {ns}: start one with "
            f"`actormq spark bridge -n {ns}` (`actormq up` starts one), or pass the "
            "option bridge=host:port")
    raise ClusterUnreachableError(
        f"name server unreachable ({'; '.join(failures)}): check the nameServer option")


def call(bridge: str, code: int, body: Mapping[str, Any],
         tls: TlsConfig | None = None) -> dict[str, Any]:  # fmt: skip
    """One request to the bridge (TLS with `tls`); the reply body, or a RocketMQSourceError."""
    deadline = time.monotonic() + RETRY_FOR_S
    key = (bridge, tls)
    while True:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = BlockingClient(bridge, tls=tls)
        try:
            resp = client.invoke(request(code, body), CALL_TIMEOUT_S)
            break
        except (OSError, ProtocolError) as exc:
            client.close()
            _clients.pop(key, None)
            if time.monotonic() >= deadline:
                raise ClusterUnreachableError(
                    f"SparkBridge {bridge} unreachable: {exc} (is `actormq up` or "
                    "`actormq spark bridge` running?)") from None
            log.warning("SparkBridge %s: %s; retrying", bridge, exc)
            time.sleep(0.5)
        except TimeoutError:
            _clients.pop(key, None)
            raise ClusterUnreachableError(
                f"SparkBridge {bridge} gave no answer within {CALL_TIMEOUT_S:.0f} s") from None
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise ClusterUnreachableError(f"{bridge} is not a SparkBridge (it answered "
                                      f"REQUEST_CODE_NOT_SUPPORTED: {resp.remark})")
    if resp.code != ResponseCode.SUCCESS:
        raise _ERRORS.get(resp.code, RocketMQSourceError)(resp.remark or f"code {resp.code}")
    try:
        return loads(resp)
    except BadBody as exc:
        raise RocketMQSourceError(f"unreadable answer from SparkBridge {bridge}: {exc}") from None
