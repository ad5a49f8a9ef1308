"""The console's front page: the brokers and the charts of the last hour.

Mirrors apache/rocketmq-dashboard's ClusterController and DashboardController.
"""

from __future__ import annotations

from flask import Blueprint, render_template

from deploy.console.cluster_service import broker_rows
from deploy.console.pages import console, read

cluster_pages = Blueprint("cluster", __name__)


@cluster_pages.get("/")
def cluster_page() -> str:
    c = console()
    rows, error = read(lambda: broker_rows(c.namesrv),
                       f"the name server {c.namesrv} did not answer")  # fmt: skip
    charts = {name: c.history.chart(f"{name}/") for name in ("tps_in", "tps_out", "disk")}
    return render_template("cluster.html", rows=rows or [], error=error, charts=charts,
                           sampling=c.sampler is not None)  # fmt: skip
