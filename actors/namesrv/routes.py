"""The name server's route tables: topics, brokers, clusters and broker liveness.

Mirrors namesrv/routeinfo/RouteInfoManager.java and namesrv/kvconfig/KVConfigManager.java,
RocketMQ 4.9.x (spec §7). Plain tables, no IO: the caller passes `now_ms` and the connection id
a registration arrived on, and closes connections the scan reports as expired.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Final

from protocol.codes import PermName

log = logging.getLogger(__name__)

MASTER_ID: Final = 0
BROKER_CHANNEL_EXPIRED_TIME_MS: Final = 120_000
PERM_READ: Final = int(PermName.PERM_READ)
PERM_WRITE: Final = int(PermName.PERM_WRITE)


@dataclass(slots=True)
class QueueData:
    """One broker's queues of one topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        """Route JSON member map (topicSysFlag and the pre-4.9 spelling topicSynFlag)."""
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSynFlag": self.topic_sys_flag,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass(slots=True)
class BrokerData:
    """One broker name: its cluster and brokerId -> address."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        """Route JSON member map, brokerId keys quoted (standard JSON)."""
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }


@dataclass(slots=True)
class BrokerLiveInfo:
    """Liveness of one broker address."""

    last_update_ms: int
    data_version: tuple[int, int] | None  # (counter, timestamp)
    conn_id: int | None
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class TopicConfigItem:
    """The part of a registered TopicConfig the name server keeps."""

    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What a slave learns about its master (empty for a master)."""

    master_addr: str | None = None
    ha_server_addr: str | None = None


class RouteInfoManager:
    """topicQueueTable, brokerAddrTable, clusterAddrTable, brokerLiveTable, filterServerTable."""

    def __init__(self, broker_expired_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS) -> None:
        self.broker_expired_ms = broker_expired_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # --- registration ---------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        data_version: tuple[int, int] | None,
        topic_configs: list[TopicConfigItem] | None,
        filter_server_list: list[str],
        conn_id: int | None,
        now_ms: int,
    ) -> RegisterResult:
        """registerBroker (spec §7 steps 1-5)."""
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        register_first = False
        bd = self.broker_addr_table.get(broker_name)
        if bd is None:
            register_first = True
            bd = BrokerData(cluster_name, broker_name)
            self.broker_addr_table[broker_name] = bd
        # A slave promoted to master keeps its address under a new id: drop the old id.
        for bid, addr in list(bd.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del bd.broker_addrs[bid]
        old_addr = bd.broker_addrs.get(broker_id)
        bd.broker_addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        if (
            topic_configs is not None
            and broker_id == MASTER_ID
            and (self.is_broker_topic_config_changed(broker_addr, data_version) or register_first)
        ):
            for tc in topic_configs:
                self._create_and_update_queue_data(broker_name, tc)

        prev = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now_ms, data_version, conn_id, ha_server_addr
        )
        if prev is None:
            log.info(
                "new broker registered addr=%s name=%s id=%d cluster=%s",
                broker_addr,
                broker_name,
                broker_id,
                cluster_name,
            )
        if filter_server_list:
            self.filter_server_table[broker_addr] = list(filter_server_list)
        else:
            self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = bd.broker_addrs.get(MASTER_ID)
            if master_addr is not None:
                live = self.broker_live_table.get(master_addr)
                if live is not None:
                    return RegisterResult(master_addr, live.ha_server_addr)
        return RegisterResult()

    def is_broker_topic_config_changed(
        self, broker_addr: str, data_version: tuple[int, int] | None
    ) -> bool:
        """True when the stored DataVersion differs (or none is stored)."""
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != data_version

    def query_data_version(
        self, broker_addr: str, data_version: tuple[int, int] | None, now_ms: int
    ) -> tuple[bool, tuple[int, int] | None]:
        """QUERY_DATA_VERSION: (changed, stored version); refresh liveness when unchanged."""
        changed = self.is_broker_topic_config_changed(broker_addr, data_version)
        live = self.broker_live_table.get(broker_addr)
        if not changed and live is not None:
            live.last_update_ms = now_ms
        return changed, live.data_version if live is not None else None

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfigItem) -> None:
        qd = QueueData(
            broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag
        )
        table = self.topic_queue_table.setdefault(tc.topic_name, {})
        old = table.get(broker_name)
        if old != qd:
            if old is None:
                log.info("new topic registered topic=%s broker=%s", tc.topic_name, broker_name)
            table[broker_name] = qd

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """unregisterBroker."""
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        remove_name = False
        bd = self.broker_addr_table.get(broker_name)
        if bd is not None:
            if bd.broker_addrs.get(broker_id) == broker_addr:
                del bd.broker_addrs[broker_id]
            if not bd.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_name = True
        log.info("broker unregistered addr=%s name=%s id=%d", broker_addr, broker_name, broker_id)
        if remove_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topic_by_broker_name(broker_name)

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            qds = self.topic_queue_table[topic]
            if qds.pop(broker_name, None) is not None and not qds:
                del self.topic_queue_table[topic]
                log.info("topic removed with its last broker topic=%s", topic)

    # --- liveness -------------------------------------------------------------------------

    def scan_not_active_broker(self, now_ms: int) -> list[tuple[str, int | None]]:
        """Expire brokers silent for broker_expired_ms; (addr, conn_id) of each to close."""
        expired = [
            (addr, live.conn_id)
            for addr, live in self.broker_live_table.items()
            if live.last_update_ms + self.broker_expired_ms < now_ms
        ]
        for addr, _ in expired:
            log.warning(
                "broker expired addr=%s (no registration for %d ms)", addr, self.broker_expired_ms
            )
            self.on_channel_destroy(addr)
        return expired

    def on_connection_closed(self, conn_id: int) -> list[str]:
        """A connection closed: remove every broker registered over it; their addresses."""
        addrs = [a for a, live in self.broker_live_table.items() if live.conn_id == conn_id]
        for a in addrs:
            self.on_channel_destroy(a)
        return addrs

    def on_channel_destroy(self, broker_addr: str) -> None:
        """onChannelDestroy: drop an address from every table."""
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for name, bd in list(self.broker_addr_table.items()):
            for bid, addr in list(bd.broker_addrs.items()):
                if addr == broker_addr:
                    del bd.broker_addrs[bid]
            if not bd.broker_addrs:
                del self.broker_addr_table[name]
                for cluster, names in list(self.cluster_addr_table.items()):
                    names.discard(name)
                    if not names:
                        del self.cluster_addr_table[cluster]
                self._remove_topic_by_broker_name(name)

    # --- queries --------------------------------------------------------------------------

    def pick_topic_route_data(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData JSON object, or None when the topic has no queues or brokers."""
        qds = self.topic_queue_table.get(topic)
        if not qds:
            return None
        broker_datas = []
        for name in sorted(qds):
            bd = self.broker_addr_table.get(name)
            if bd is not None:
                broker_datas.append(bd.to_json_obj())
        if not broker_datas:
            return None
        filter_table: dict[str, list[str]] = {}
        for bd_obj in broker_datas:
            for addr in bd_obj["brokerAddrs"].values():
                fs = self.filter_server_table.get(addr)
                if fs:
                    filter_table[addr] = fs
        return {
            "brokerDatas": broker_datas,
            "filterServerTable": filter_table,
            "queueDatas": [qds[n].to_json_obj() for n in sorted(qds)],
        }

    def get_all_cluster_info(self) -> dict[str, Any]:
        """ClusterInfo JSON object."""
        return {
            "brokerAddrTable": {n: bd.to_json_obj() for n, bd in self.broker_addr_table.items()},
            "clusterAddrTable": {c: sorted(ns) for c, ns in self.cluster_addr_table.items()},
        }

    def get_all_topic_list(self) -> list[str]:
        """Every topic with routes."""
        return sorted(self.topic_queue_table)

    def topics_by_sys_flag(self, want: int, refuse: int) -> list[str]:
        """Topics whose first queue data's topicSysFlag has every `want` bit and no `refuse`
        bit (getUnitTopics / getHasUnitSubTopicList / getHasUnitSubUnUnitTopicList)."""
        out = []
        for topic, qds in self.topic_queue_table.items():
            first = next(iter(qds.values()), None)
            if first is not None:
                flag = first.topic_sys_flag
                if flag & want == want and not flag & refuse:
                    out.append(topic)
        return sorted(out)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics hosted by any broker of a cluster."""
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, qds in self.topic_queue_table.items() if names & qds.keys())

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV (only the cluster's brokers when a cluster is given)."""
        if not cluster:
            self.topic_queue_table.pop(topic, None)
            return
        qds = self.topic_queue_table.get(topic)
        if qds is None:
            return
        for name in self.cluster_addr_table.get(cluster, set()):
            qds.pop(name, None)
        if not qds:
            del self.topic_queue_table[topic]

    def _change_write_perm(self, broker_name: str, wipe: bool) -> int:
        n = 0
        for qds in self.topic_queue_table.values():
            qd = qds.get(broker_name)
            if qd is not None:  # operateWritePermOfBroker: adding sets read + write outright
                qd.perm = qd.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
                n += 1
        return n

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: the number of topics touched."""
        return self._change_write_perm(broker_name, wipe=True)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER: the number of topics touched."""
        return self._change_write_perm(broker_name, wipe=False)


class KVConfigManager:
    """namespace -> key -> value; optionally persisted to kvConfig.json."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Load kvConfig.json (with .bak fallback) when a path is set."""
        if not self.path:
            return
        from store.config_files import read_json_with_bak

        text = read_json_with_bak(self.path)
        if text:
            obj = json.loads(text)
            table = obj.get("configTable", {}) if isinstance(obj, dict) else {}
            self.table = {ns: {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}

    def persist(self) -> None:
        """Write kvConfig.json atomically when a path is set."""
        if not self.path:
            return
        from store.config_files import write_text_atomic

        write_text_atomic(
            self.path, json.dumps({"configTable": self.table}, indent="\t", sort_keys=True)
        )

    def put(self, namespace: str, key: str, value: str) -> None:
        """putKVConfig."""
        self.table.setdefault(namespace, {})[key] = value
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        """getKVConfig."""
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """deleteKVConfig."""
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            self.persist()  # an emptied namespace stays (listed as {"table":{}}), as in Java

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        """getKVListByNamespace."""
        kv = self.table.get(namespace)
        return dict(kv) if kv is not None else None
