"""The Grafana dashboard in the repo (deploy/console/grafana) asks only for metrics the console
exposes: every metric name in every panel's query is one of /metrics' families."""

from __future__ import annotations

import json
import re
from pathlib import Path

from deploy.console.actor_metrics import ActorMetrics
from deploy.console.metrics import FAMILIES, RUNTIME_VALUES

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy/console/grafana/actormq-dashboard.json"


def test_every_panel_queries_metrics_the_console_exposes() -> None:
    exposed = {name for name, _help, _labels in FAMILIES}
    exposed |= {f"rocketmq_brokeruntime_{suffix}" for suffix, *_ in RUNTIME_VALUES}
    exposed |= {f.name for f in ActorMetrics().families()}
    dash = json.loads(DASHBOARD.read_text())
    assert dash["panels"]
    for panel in dash["panels"]:
        for target in panel["targets"]:
            names = set(re.findall(r"\b(?:rocketmq|actormq)_[a-z0-9_]+", target["expr"]))
            assert names and names <= exposed, (panel["title"], names - exposed)
