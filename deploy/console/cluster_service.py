"""The console's front page: every broker of the cluster with its version, TPS in and out,
disk and commit-log use; and the figures sampled for its charts.

Mirrors apache/rocketmq-dashboard's ClusterServiceImpl (GET_BROKER_CLUSTER_INFO, then
GET_BROKER_RUNTIME_INFO of each broker) and its DashboardCollectTask (the figures kept for the
charts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deploy.admin_ext import AdminError, call, cluster_info, json_object
from deploy.console.consumer_service import consume_stats_of, group_names
from protocol.codes import RequestCode as RC


@dataclass(frozen=True)
class BrokerRow:
    cluster: str
    broker: str
    id: int
    addr: str
    version: str = ""
    put_tps: str = ""
    get_tps: str = ""
    disk: str = ""
    commitlog_max: str = ""
    today_in: str = ""
    today_out: str = ""
    error: str = ""


def _first(text: Any) -> str:
    """The first figure of a "10 s, 1 min, 10 min" TPS text, to two decimals."""
    first = str(text or "").split(" ")[0]
    try:
        return f"{float(first):.2f}"
    except ValueError:
        return first


def broker_rows(namesrv: str) -> list[BrokerRow]:
    """One row per broker address (masters and slaves)."""
    info = cluster_info(namesrv)
    rows = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                try:
                    t = json_object(call(addr, RC.GET_BROKER_RUNTIME_INFO)).get("table", {})
                except (AdminError, ValueError) as exc:
                    rows.append(BrokerRow(cluster, name, bid, addr, error=str(exc)))
                    continue
                rows.append(BrokerRow(
                    cluster, name, bid, addr, str(t.get("brokerVersionDesc", "")),
                    _first(t.get("putTps")), _first(t.get("getTotalTps")),
                    str(t.get("commitLogDiskRatio", "")), str(t.get("commitLogMaxOffset", "")),
                    str(t.get("msgPutTotalTodayNow", "")), str(t.get("msgGetTotalTodayNow", ""))))
    return rows


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def sample(namesrv: str) -> dict[str, float]:
    """The charted figures now: `tps_in/<broker addr>`, `tps_out/...`, `disk/...` (percent),
    and `lag/<group>/<topic> <broker>/<queue id>` (each queue's lag)."""
    out: dict[str, float] = {}
    rows = broker_rows(namesrv)
    for row in rows:
        if row.error:
            continue
        label = f"{row.broker}@{row.addr}"
        for key, text in (("tps_in", row.put_tps), ("tps_out", row.get_tps)):
            value = _number(text)
            if value is not None:
                out[f"{key}/{label}"] = value
        disk = _number(row.disk)
        if disk is not None:
            out[f"disk/{label}"] = disk * 100.0
    masters = [(r.broker, r.addr) for r in rows if r.id == 0 and not r.error]
    failed: list[str] = []  # a master that does not answer: its queues miss this sample
    names = group_names(masters, failed)
    for group, (queues, _tps) in consume_stats_of(masters, names, failed).items():
        for q in queues:
            out[f"lag/{group}/{q.topic} {q.broker}/{q.queue_id}"] = q.lag
    return out

