"""The name server's request processor (a ProcessorCore).

Mirrors namesrv/processor/DefaultRequestProcessor.java, RocketMQ 4.9.x: decodes headers and
bodies and calls into RouteInfoManager / KVConfigManager. Unknown codes get no reply (Java
returns null); they are logged.
"""

from __future__ import annotations

import json
import logging
import struct
import zlib
from typing import Any, Final

from actors.acl.plain_access_validator import namesrv_access_validator
from actors.core import FAQ_SUFFIX, AccessCheck, CodeDispatchCore, Request, properties_update
from actors.namesrv.config import NamesrvConfig
from actors.namesrv.routes import (
    BROKER_CHANNEL_EXPIRED_TIME_MS,
    KVConfigManager,
    RouteInfoManager,
    TopicConfigItem,
)
from protocol.bodies import dumps_compact, loads_lenient
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.codes import TopicSysFlag
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError
from protocol.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)

log = logging.getLogger(__name__)

SCAN_INTERVAL_MS: Final = 10_000
ORDER_TOPIC_CONFIG_NAMESPACE: Final = "ORDER_TOPIC_CONFIG"
TOPIC_SYS_FLAG_UNIT: Final = int(TopicSysFlag.FLAG_UNIT)
TOPIC_SYS_FLAG_UNIT_SUB: Final = int(TopicSysFlag.FLAG_UNIT_SUB)
V3_0_11: Final = 37
V4_9_4: Final = 401

_INT = struct.Struct(">i")


def _topic_item(name: str | None, obj: dict[str, Any]) -> TopicConfigItem:
    return TopicConfigItem(
        str(obj.get("topicName") or name),
        int(obj.get("readQueueNums", 16)),
        int(obj.get("writeQueueNums", 16)),
        int(obj.get("perm", 6)),
        int(obj.get("topicSysFlag", obj.get("topicSynFlag", 0))),
    )


def _data_version(obj: Any) -> tuple[int, int] | None:
    if not isinstance(obj, dict):
        return None
    return int(obj.get("counter", 0)), int(obj.get("timestamp", 0))


def parse_topic_wrapper(obj: Any) -> tuple[tuple[int, int] | None, list[TopicConfigItem]]:
    """TopicConfigSerializeWrapper JSON object -> (data version, topic items)."""
    if not isinstance(obj, dict):
        raise ValueError("topicConfigSerializeWrapper is not an object")
    table = obj.get("topicConfigTable") or {}
    items = [_topic_item(k, v) for k, v in table.items() if isinstance(v, dict)]
    return _data_version(obj.get("dataVersion")), items


def decode_register_body(
    body: bytes | memoryview, compressed: bool, version: int
) -> tuple[tuple[int, int] | None, list[TopicConfigItem], list[str]]:
    """RegisterBrokerBody (plain, zlib-compressed, or pre-V3_0_11 bare wrapper); none: an
    empty wrapper (DataVersion 0/0), as registerBrokerWithFilterServer builds one."""
    if not body:
        return (0, 0), [], []
    if compressed:
        raw = zlib.decompress(bytes(body))
        pos = 0

        def chunk() -> bytes:
            nonlocal pos
            (n,) = _INT.unpack_from(raw, pos)
            pos += 4
            out = raw[pos : pos + n]
            if n < 0 or len(out) != n:
                raise ValueError("truncated compressed register body")
            pos += n
            return out

        dv = _data_version(json.loads(chunk()))
        (count,) = _INT.unpack_from(raw, pos)
        pos += 4
        items = []
        for _ in range(count):
            parts = chunk().decode().split(" ")
            items.append(TopicConfigItem(parts[0], int(parts[1]), int(parts[2]), int(parts[3])))
        filters = json.loads(chunk()) if pos < len(raw) else []
        return dv, items, [str(f) for f in filters or []]
    obj = loads_lenient(body)
    if version >= V3_0_11 and isinstance(obj, dict) and "topicConfigSerializeWrapper" in obj:
        dv, items = parse_topic_wrapper(obj.get("topicConfigSerializeWrapper") or {})
        return dv, items, [str(f) for f in obj.get("filterServerList") or []]
    dv, items = parse_topic_wrapper(obj)
    return dv, items, []


class NamesrvProcessor(CodeDispatchCore):
    """DefaultRequestProcessor over a RouteInfoManager (implements actors.core.ProcessorCore)."""

    REPLY_UNKNOWN = False  # Java returns null: no reply
    BAD_REQUEST_ERRORS = (ValueError, KeyError, TypeError, struct.error, zlib.error)
    BAD_REQUEST_REMARK = "bad request"

    def __init__(
        self,
        routes: RouteInfoManager | None = None,
        kv: KVConfigManager | None = None,
        *,
        order_message_enable: bool = False,
        scan_interval_ms: int = SCAN_INTERVAL_MS,
        broker_expired_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS,
        config: NamesrvConfig | None = None,
    ) -> None:
        if config is None:  # keyword arguments (tests): the same values as a config
            config = NamesrvConfig(orderMessageEnable=order_message_enable,
                                   scanNotActiveBrokerInterval=scan_interval_ms,
                                   brokerChannelExpiredTime=broker_expired_ms)  # fmt: skip
        self.config = config
        self.access: AccessCheck | None = (
            namesrv_access_validator(config.acl_home, config.aclPlainFile)
            if config.aclEnable
            else None
        )
        self.routes = routes or RouteInfoManager(config.brokerChannelExpiredTime)
        if kv is None:
            kv = KVConfigManager(config.kvConfigPath or None)
            kv.load()
        self.kv = kv
        self._next_scan_ms: int | None = None
        self.expired_conns: list[int] = []  # connections the runtime should close
        self.handlers = {
            RC.REGISTER_BROKER: self._register_broker,
            RC.UNREGISTER_BROKER: self._unregister_broker,
            RC.GET_ROUTEINFO_BY_TOPIC: self._get_route,
            RC.GET_BROKER_CLUSTER_INFO: self._cluster_info,
            RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._all_topics,
            RC.DELETE_TOPIC_IN_NAMESRV: self._delete_topic,
            RC.QUERY_DATA_VERSION: self._query_data_version,
            RC.PUT_KV_CONFIG: self._put_kv,
            RC.GET_KV_CONFIG: self._get_kv,
            RC.DELETE_KV_CONFIG: self._delete_kv,
            RC.GET_KVLIST_BY_NAMESPACE: self._kv_list,
            RC.GET_TOPICS_BY_CLUSTER: self._topics_by_cluster,
            RC.WIPE_WRITE_PERM_OF_BROKER: self._wipe_write_perm,
            RC.ADD_WRITE_PERM_OF_BROKER: self._add_write_perm,
            RC.GET_SYSTEM_TOPIC_LIST_FROM_NS: self._system_topics,
            RC.GET_NAMESRV_CONFIG: self._get_config,
            RC.UPDATE_NAMESRV_CONFIG: self._update_config,
            RC.GET_UNIT_TOPIC_LIST: self._unit_topics,
            RC.GET_HAS_UNIT_SUB_TOPIC_LIST: self._unit_sub_topics,
            RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._unit_sub_ununit_topics,
        }

    @property
    def order_message_enable(self) -> bool:
        """orderMessageEnable (routes carry the ORDER_TOPIC_CONFIG KV entry)."""
        return self.config.orderMessageEnable

    @property
    def scan_interval_ms(self) -> int:
        """scanNotActiveBrokerInterval."""
        return self.config.scanNotActiveBrokerInterval

    # --- ProcessorCore --------------------------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """The ACL check of the write codes (aclEnable), then the code's handler."""
        access = self.access
        if access is not None:
            cmd = req.cmd
            refused = access.check(cmd.code, cmd.ext_fields, cmd.body, req.peer, now_ms)
            if refused is not None:
                return None if cmd.is_oneway else cmd.make_response(RS.SYSTEM_ERROR, refused)
        return super().process(req, now_ms)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Unregister the brokers registered over that connection."""
        self.routes.on_connection_closed(conn_id)

    def tick(self, now_ms: int) -> int | None:
        """The 10 s liveness scan; expired connections are queued in expired_conns."""
        if self._next_scan_ms is None:
            self._next_scan_ms = now_ms + self.scan_interval_ms
        if now_ms >= self._next_scan_ms:
            for _addr, conn_id in self.routes.scan_not_active_broker(now_ms):
                if conn_id is not None:
                    self.expired_conns.append(conn_id)
            self._next_scan_ms = now_ms + self.scan_interval_ms
        return max(0, self._next_scan_ms - now_ms)

    # --- handlers -------------------------------------------------------------------------

    def _register_broker(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        h = RegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
        broker_name = h.broker_name
        broker_addr = h.broker_addr
        crc = h.body_crc32 or 0
        body = cmd.body
        if crc != 0 and (zlib.crc32(body) & 0x7FFFFFFF) != crc:
            log.warning(
                "register broker: crc32 mismatch broker=%s addr=%s", broker_name, broker_addr
            )
            return cmd.make_response(RS.SYSTEM_ERROR, "crc32 not match")
        dv, items, filters = decode_register_body(body, bool(h.compressed), cmd.version)
        result = self.routes.register_broker(
            h.cluster_name,
            broker_addr,
            broker_name,
            h.broker_id,
            h.ha_server_addr,
            dv,
            items if body else None,
            filters,
            req.conn_id,
            now_ms,
        )
        out_ext = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr).to_ext()
        order_conf = self.kv.list_namespace(ORDER_TOPIC_CONFIG_NAMESPACE)
        resp_body = dumps_compact({"table": order_conf}) if order_conf is not None else b""
        return cmd.make_response(RS.SUCCESS, None, out_ext, resp_body)

    def _unregister_broker(self, req: Request, now_ms: int) -> RemotingCommand:
        h = UnRegisterBrokerRequestHeader.from_ext(req.cmd.ext_fields)
        self.routes.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name, h.broker_id)
        return req.cmd.make_response(RS.SUCCESS, None, {})

    def _get_route(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        topic = GetRouteInfoRequestHeader.from_ext(cmd.ext_fields).topic
        route = self.routes.pick_topic_route_data(topic)
        if route is None:
            return cmd.make_response(
                RS.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {topic}{FAQ_SUFFIX}",
            )
        if self.order_message_enable:
            conf = self.kv.get(ORDER_TOPIC_CONFIG_NAMESPACE, topic)
            if conf:
                route["orderTopicConf"] = conf
        # Standard JSON (quoted brokerId keys) for every client version: every client parses it.
        return cmd.make_response(RS.SUCCESS, None, None, dumps_compact(route))

    def _cluster_info(self, req: Request, now_ms: int) -> RemotingCommand:
        return req.cmd.make_response(
            RS.SUCCESS, None, None, dumps_compact(self.routes.get_all_cluster_info())
        )

    def _all_topics(self, req: Request, now_ms: int) -> RemotingCommand:
        body = dumps_compact({"topicList": self.routes.get_all_topic_list()})
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    def _system_topics(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names, plus one broker's address
        (the Java admin asks that broker for its system topics, code 305)."""
        topics = set(self.routes.cluster_addr_table)
        for names in self.routes.cluster_addr_table.values():
            topics.update(names)
        out: dict[str, Any] = {"topicList": sorted(topics)}
        for name in sorted(self.routes.broker_addr_table):
            addrs = self.routes.broker_addr_table[name].broker_addrs
            if addrs:
                out["brokerAddr"] = addrs[min(addrs)]
                break
        return req.cmd.make_response(RS.SUCCESS, None, None, dumps_compact(out))

    def _delete_topic(self, req: Request, now_ms: int) -> RemotingCommand:
        h = DeleteTopicFromNamesrvRequestHeader.from_ext(req.cmd.ext_fields)
        self.routes.delete_topic(h.topic, h.cluster_name or None)
        return req.cmd.make_response(RS.SUCCESS, None, {})

    def _query_data_version(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        # Only brokerAddr is used; the other QueryDataVersionRequestHeader fields are not required
        # here (lenient towards partial headers).
        addr = (cmd.ext_fields or {}).get("brokerAddr")
        if addr is None:
            raise HeaderFieldError(RS.SYSTEM_ERROR, "the custom field <brokerAddr> is null")
        dv = _data_version(loads_lenient(cmd.body)) if cmd.body else None
        changed, stored = self.routes.query_data_version(addr, dv, now_ms)
        body = dumps_compact({"counter": stored[0], "timestamp": stored[1]}) if stored else b""
        return cmd.make_response(
            RS.SUCCESS, None, QueryDataVersionResponseHeader(changed).to_ext(), body
        )

    def _put_kv(self, req: Request, now_ms: int) -> RemotingCommand:
        h = PutKVConfigRequestHeader.from_ext(req.cmd.ext_fields)
        self.kv.put(h.namespace, h.key, h.value)
        return req.cmd.make_response(RS.SUCCESS, None, {})

    def _get_kv(self, req: Request, now_ms: int) -> RemotingCommand:
        h = GetKVConfigRequestHeader.from_ext(req.cmd.ext_fields)
        ns, key = h.namespace, h.key
        value = self.kv.get(ns, key)
        if value is None:
            return req.cmd.make_response(
                RS.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}"
            )
        return req.cmd.make_response(RS.SUCCESS, None, GetKVConfigResponseHeader(value).to_ext())

    def _delete_kv(self, req: Request, now_ms: int) -> RemotingCommand:
        h = DeleteKVConfigRequestHeader.from_ext(req.cmd.ext_fields)
        self.kv.delete(h.namespace, h.key)
        return req.cmd.make_response(RS.SUCCESS, None, {})

    def _kv_list(self, req: Request, now_ms: int) -> RemotingCommand:
        ns = GetKVListByNamespaceRequestHeader.from_ext(req.cmd.ext_fields).namespace
        table = self.kv.list_namespace(ns)
        if table is None:
            return req.cmd.make_response(RS.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")
        return req.cmd.make_response(RS.SUCCESS, None, None, dumps_compact({"table": table}))

    def _topics_by_cluster(self, req: Request, now_ms: int) -> RemotingCommand:
        cluster = GetTopicsByClusterRequestHeader.from_ext(req.cmd.ext_fields).cluster
        body = dumps_compact({"topicList": self.routes.get_topics_by_cluster(cluster)})
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    def _wipe_write_perm(self, req: Request, now_ms: int) -> RemotingCommand:
        h = WipeWritePermOfBrokerRequestHeader.from_ext(req.cmd.ext_fields)
        n = self.routes.wipe_write_perm_of_broker(h.broker_name)
        return req.cmd.make_response(
            RS.SUCCESS, None, WipeWritePermOfBrokerResponseHeader(n).to_ext()
        )

    def _add_write_perm(self, req: Request, now_ms: int) -> RemotingCommand:
        h = AddWritePermOfBrokerRequestHeader.from_ext(req.cmd.ext_fields)
        n = self.routes.add_write_perm_of_broker(h.broker_name)
        return req.cmd.make_response(
            RS.SUCCESS, None, AddWritePermOfBrokerResponseHeader(n).to_ext()
        )

    # --- GET / UPDATE_NAMESRV_CONFIG (mqadmin getNamesrvConfig / updateNamesrvConfig) --------

    def _get_config(self, req: Request, now_ms: int) -> RemotingCommand:
        """Every config name and value as properties text."""
        return req.cmd.make_response(RS.SUCCESS, None, None, self.config.text().encode())

    def _update_config(self, req: Request, now_ms: int) -> RemotingCommand:
        """Properties text in the body: the known names change now (the route expiry and scan
        period included) and are persisted to configStorePath; configBlackList's are refused."""
        cmd = req.cmd
        props = properties_update(cmd, self.config.configBlackList)
        if isinstance(props, RemotingCommand):  # refused
            return props
        try:
            unknown = self.config.update(props)
        except ValueError as exc:
            return cmd.make_response(RS.SYSTEM_ERROR, f"update namesrv config failed: {exc}")
        self.routes.broker_expired_ms = self.config.brokerChannelExpiredTime
        self._next_scan_ms = None  # the new scan period applies from now
        try:
            self.config.persist()
        except OSError as exc:
            log.error("namesrv config not persisted to %s: %s", self.config.configStorePath, exc)
        log.info("namesrv config updated %s%s", sorted(set(props) - set(unknown)),
                 f"; ignored unknown {unknown}" if unknown else "")  # fmt: skip
        return cmd.make_response(RS.SUCCESS)

    # --- unit topics (GET_UNIT_TOPIC_LIST and the two GET_HAS_UNIT_SUB_* lists) ---------------

    def _unit_topic_list(self, req: Request, want: int, refuse: int) -> RemotingCommand:
        """TopicList of the topics some queue data of which has every `want` topicSysFlag bit and
        none of `refuse` (RouteInfoManager.getUnitTopics and the two variants)."""
        topics = self.routes.topics_by_sys_flag(want, refuse)
        return req.cmd.make_response(RS.SUCCESS, None, None, dumps_compact({"topicList": topics}))

    def _unit_topics(self, req: Request, now_ms: int) -> RemotingCommand:
        return self._unit_topic_list(req, TOPIC_SYS_FLAG_UNIT, 0)

    def _unit_sub_topics(self, req: Request, now_ms: int) -> RemotingCommand:
        return self._unit_topic_list(req, TOPIC_SYS_FLAG_UNIT_SUB, 0)

    def _unit_sub_ununit_topics(self, req: Request, now_ms: int) -> RemotingCommand:
        return self._unit_topic_list(req, TOPIC_SYS_FLAG_UNIT_SUB, TOPIC_SYS_FLAG_UNIT)
