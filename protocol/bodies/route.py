"""Routing bodies: a topic's route and the cluster's brokers.

Mirrors common/protocol/route/TopicRouteData.java, QueueData.java, BrokerData.java and
common/protocol/body/ClusterInfo.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Self

from protocol.bodies.json_body import (
    JsonBody,
    JsonObj,
    drop_none,
    dumps_compact,
    int_keyed,
    to_str,
)


@dataclass(slots=True)
class QueueData(JsonBody):
    """One broker's queues for a topic."""

    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 6
    topic_sys_flag: int = 0

    def to_obj(self, *, with_syn_flag: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }
        if with_syn_flag:
            d["topicSynFlag"] = self.topic_sys_flag  # the <= 4.8 spelling
        return d

    @classmethod
    def from_obj(cls, obj: object, where: str = "QueueData") -> Self:
        o = JsonObj(obj, where)
        flag = o.integer("topicSysFlag", o.integer("topicSynFlag", 0))
        return cls(
            o.string("brokerName"),
            o.integer("readQueueNums"),
            o.integer("writeQueueNums"),
            o.integer("perm", 6),
            flag,
        )


MASTER_ID: Final = 0


@dataclass(slots=True)
class BrokerData(JsonBody):
    """A broker name's addresses by broker id (0 is the master)."""

    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        """Address of broker id 0, if any."""
        return self.broker_addrs.get(MASTER_ID)

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "BrokerData") -> Self:
        o = JsonObj(obj, where)
        w = f"{where}.brokerAddrs"
        addrs = {
            k: to_str(v, w) for k, v in int_keyed(o.mapping("brokerAddrs"), w) if v is not None
        }
        return cls(o.string("cluster"), o.string("brokerName"), addrs)


@dataclass(slots=True)
class TopicRouteData(JsonBody):
    """GET_ROUTEINFO_BY_TOPIC response body."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_obj(self, *, with_syn_flag: bool = True) -> dict[str, Any]:
        return drop_none(
            {
                "brokerDatas": [b.to_obj() for b in self.broker_datas],
                "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
                "orderTopicConf": self.order_topic_conf,
                "queueDatas": [q.to_obj(with_syn_flag=with_syn_flag) for q in self.queue_datas],
            }
        )

    def to_json(self, *, with_syn_flag: bool = True) -> bytes:
        """Compact JSON; with_syn_flag=False leaves out the <= 4.8 topicSynFlag member."""
        return dumps_compact(self.to_obj(with_syn_flag=with_syn_flag))

    @classmethod
    def from_obj(cls, obj: object, where: str = "TopicRouteData") -> Self:
        o = JsonObj(obj, where)
        w = f"{where}.filterServerTable"
        fst = {}
        for k, v in o.mapping("filterServerTable").items():
            fst[k] = JsonObj({"v": v}, w).str_list("v")
        return cls(
            o.objs("queueDatas", QueueData.from_obj),
            o.objs("brokerDatas", BrokerData.from_obj),
            fst,
            o.opt_str("orderTopicConf"),
        )


@dataclass(slots=True)
class ClusterInfo(JsonBody):
    """GET_BROKER_CLUSTER_INFO response body."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_obj() for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": {k: list(v) for k, v in self.cluster_addr_table.items()},
        }

    @classmethod
    def from_obj(cls, obj: object, where: str = "ClusterInfo") -> Self:
        o = JsonObj(obj, where)
        bat = {
            k: BrokerData.from_obj(v, f"{where}.brokerAddrTable")
            for k, v in o.mapping("brokerAddrTable").items()
            if v is not None
        }
        w = f"{where}.clusterAddrTable"
        cat = {
            k: JsonObj({"v": v}, w).str_list("v") for k, v in o.mapping("clusterAddrTable").items()
        }
        return cls(bat, cat)
