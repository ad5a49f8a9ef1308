"""The console's web application: pages and /metrics over a RocketMQ 4.x name server.

Mirrors what apache/rocketmq-dashboard shows (its ClusterController for the front page) and what
rocketmq-exporter serves (/metrics), server-rendered with Flask and Jinja templates (every
value escaped). Each request asks the cluster afresh through the admin codes
(deploy/admin_ext); an unreachable cluster shows as an error on the page, never a trace.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, render_template, request

from deploy.admin_ext import AdminError, call, cluster_info, json_object
from deploy.console.actor_metrics import ActorMetrics
from deploy.console.metrics import MetricsCollector, exposition
from deploy.console.views import (
    group_rows,
    message_trace,
    producer_rows,
    topic_detail,
    topic_rows,
)
from protocol.codes import RequestCode as RC
from protocol.trace import TRACE_TOPIC

log = logging.getLogger(__name__)

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def _broker_rows(namesrv: str) -> list[dict[str, Any]]:
    """One row per broker address: what the dashboard's cluster page shows."""
    info = cluster_info(namesrv)
    rows = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                row: dict[str, Any] = {"cluster": cluster, "broker": name, "id": bid,
                                       "addr": addr, "error": ""}
                try:
                    table = json_object(call(addr, RC.GET_BROKER_RUNTIME_INFO)).get("table", {})
                except (AdminError, ValueError) as exc:
                    row["error"] = str(exc)
                    table = {}
                row.update(version=table.get("brokerVersionDesc", ""),
                           put_tps=str(table.get("putTps", "")).split(" ")[0],
                           get_tps=str(table.get("getTotalTps", "")).split(" ")[0],
                           disk=table.get("commitLogDiskRatio", ""),
                           commitlog_max=table.get("commitLogMaxOffset", ""),
                           today_in=table.get("msgPutTotalTodayNow", ""),
                           today_out=table.get("msgGetTotalTodayNow", ""))
                rows.append(row)
    return rows


def create_app(namesrv: str) -> Flask:
    """The console for the cluster of `namesrv` (host:port)."""
    app = Flask(__name__)
    collector = MetricsCollector(namesrv)
    actors = ActorMetrics()

    @app.get("/")
    def cluster_page() -> str:
        error, rows = "", []
        try:
            rows = _broker_rows(namesrv)
        except (AdminError, ValueError) as exc:
            error = f"the name server {namesrv} did not answer: {exc}"
        return render_template("cluster.html", namesrv=namesrv, rows=rows, error=error)

    @app.get("/topics")
    def topics_page() -> str:
        error, rows = "", []
        try:
            rows = topic_rows(namesrv)
        except (AdminError, ValueError) as exc:
            error = f"topics not read: {exc}"
        return render_template("topics.html", namesrv=namesrv, rows=rows, error=error)

    @app.get("/topic/<name>")
    def topic_page(name: str) -> str:
        error, detail = "", None
        try:
            detail = topic_detail(namesrv, name)
        except (AdminError, ValueError) as exc:
            error = f"topic {name} not read: {exc}"
        return render_template("topic.html", namesrv=namesrv, name=name, detail=detail,
                               error=error)  # fmt: skip

    @app.get("/producers")
    def producers_page() -> str:
        topic = (request.args.get("topic") or "").strip()
        group = (request.args.get("group") or "").strip()
        error, rows = "", []
        if topic and group:
            try:
                rows = producer_rows(namesrv, topic, group)
                if not rows:
                    error = f"no producer of group {group} is connected to the brokers of {topic}"
            except (AdminError, ValueError) as exc:
                error = f"producers not read: {exc}"
        return render_template("producers.html", namesrv=namesrv, topic=topic, group=group,
                               rows=rows, error=error)  # fmt: skip

    @app.get("/groups")
    def groups_page() -> str:
        error, rows = "", []
        try:
            rows = group_rows(namesrv)
        except (AdminError, ValueError) as exc:
            error = f"consumer groups not read: {exc}"
        return render_template("groups.html", namesrv=namesrv, rows=rows, error=error)

    @app.get("/trace")
    def trace_page() -> str:
        msg_id = (request.args.get("msgId") or "").strip()
        topic = (request.args.get("traceTopic") or "").strip() or TRACE_TOPIC
        error, views = "", []
        if msg_id:
            try:
                views = message_trace(namesrv, msg_id, topic)
                if not views:
                    error = f"no trace of message {msg_id} in {topic}"
            except (AdminError, ValueError) as exc:
                error = f"trace not read: {exc}"
        return render_template("trace.html", namesrv=namesrv, msg_id=msg_id, trace_topic=topic,
                               views=views, error=error)  # fmt: skip

    @app.get("/metrics")
    def metrics() -> Response:
        families = actors.families()
        try:
            families = collector.collect() + families
        except (AdminError, ValueError) as exc:  # the cluster part is absent from this scrape
            log.warning("metrics: cluster not scraped: %s", exc)
        return Response(exposition(families), mimetype=None, content_type=PROMETHEUS_TEXT)

    return app
