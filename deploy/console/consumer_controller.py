"""The console's consumer group and producer pages: the group list, one group (lag per queue
as a table and a chart, connections, subscriptions, reset by time, skip the backlog, delete),
a client's running info, and a producer group's connections.

Mirrors apache/rocketmq-dashboard's ConsumerController and ProducerController.
"""

from __future__ import annotations

import time

from flask import Blueprint, render_template, request, url_for
from werkzeug.wrappers import Response

from deploy.console.consumer_service import (
    delete_group,
    group_detail,
    group_rows,
    reset_offset_by_time,
    running_info,
    skip_backlog,
)
from deploy.console.pages import act, console, local_input, parse_ms, read
from deploy.console.producer_service import producer_rows
from deploy.console.topic_service import ConsoleInputError

consumer_pages = Blueprint("groups", __name__)


@consumer_pages.get("/groups")
def groups_page() -> str:
    rows, error = read(lambda: group_rows(console().namesrv), "consumer groups not read")
    return render_template("groups.html", rows=rows or [], error=error)


@consumer_pages.get("/group/<name>")
def group_page(name: str) -> str:
    c = console()
    detail, error = read(lambda: group_detail(c.namesrv, name), f"group {name} not read")
    lag_chart = c.history.chart(f"lag/{name}/")
    return render_template("group.html", name=name, detail=detail, error=error,
                           lag_chart=lag_chart, sampling=c.sampler is not None,
                           now_input=local_input(time.time() * 1000))  # fmt: skip


@consumer_pages.post("/group/<name>/reset")
def group_reset(name: str) -> Response:
    f = request.form

    def run() -> str:
        topic = f.get("topic", "").strip()
        if not topic:
            raise ConsoleInputError("choose the topic to reset")
        ts = parse_ms(f.get("time", ""), "the reset time")
        rows = reset_offset_by_time(console().namesrv, topic, name, ts, f.get("force") == "on")
        offline = " (group offline: offsets written directly)" if any(r.offline for r in rows) \
            else ""  # fmt: skip
        return (f"group {name} reset on {topic}: "
                + ", ".join(f"{r.broker}/{r.queue_id}->{r.offset}" for r in rows) + offline)

    return act(run, f"group {name} not reset", url_for("groups.group_page", name=name))


@consumer_pages.post("/group/<name>/skip")
def group_skip(name: str) -> Response:
    def run() -> str:
        rows = skip_backlog(console().namesrv, name)
        return f"group {name} skipped its backlog: {len(rows)} queues at their max offset"

    return act(run, f"group {name} did not skip its backlog",
               url_for("groups.group_page", name=name))  # fmt: skip


@consumer_pages.post("/group/<name>/delete")
def group_delete(name: str) -> Response:
    def run() -> str:
        return f"group {name} deleted on {', '.join(delete_group(console().namesrv, name))}"

    return act(run, f"group {name} not deleted", url_for("groups.groups_page"))


@consumer_pages.get("/group/<name>/client/<path:client_id>")
def client_page(name: str, client_id: str) -> str:
    text, error = read(lambda: running_info(console().namesrv, name, client_id),
                       f"running info of {client_id} not read")  # fmt: skip
    return render_template("client.html", name=name, client_id=client_id, text=text or "",
                           error=error)  # fmt: skip


@consumer_pages.get("/producers")
def producers_page() -> str:
    topic = (request.args.get("topic") or "").strip()
    group = (request.args.get("group") or "").strip()
    rows, error = [], ""
    if topic and group:
        got, error = read(lambda: producer_rows(console().namesrv, topic, group),
                          "producers not read")  # fmt: skip
        rows = got or []
        if not rows and not error:
            error = f"no producer of group {group} is connected to the brokers of {topic}"
    return render_template("producers.html", topic=topic, group=group, rows=rows, error=error)
