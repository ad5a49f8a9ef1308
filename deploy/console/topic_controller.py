"""The console's topic pages: the list (with create), one topic (route, queues, groups, update,
delete, a test send).

Mirrors apache/rocketmq-dashboard's TopicController.
"""

from __future__ import annotations

from flask import Blueprint, render_template, request, url_for
from werkzeug.wrappers import Response

from deploy.console.pages import act, console, read
from deploy.console.topic_service import (
    create_or_update_topic,
    delete_topic,
    send_test_message,
    topic_detail,
    topic_rows,
)

topic_pages = Blueprint("topics", __name__)


@topic_pages.get("/topics")
def topics_page() -> str:
    c = console()
    rows, error = read(lambda: topic_rows(c.namesrv), "topics not read")
    kind = request.args.get("kind", "")
    shown = [r for r in rows or [] if not kind or r.kind == kind]
    return render_template("topics.html", rows=shown, error=error, kind=kind,
                           total=len(rows or []))  # fmt: skip


@topic_pages.post("/topics")
def topic_save() -> Response:
    f = request.form
    topic = f.get("topic", "").strip()

    def run() -> str:
        brokers = create_or_update_topic(
            console().namesrv, f.get("cluster", "").strip() or None, topic,
            f.get("read_queues", "8"), f.get("write_queues", "8"), f.get("perm", "6"),
            None if f.get("keep_order") else f.get("order") == "on")
        return f"topic {topic} written to {', '.join(brokers)}"

    back = url_for("topics.topic_page", name=topic) if topic else url_for("topics.topics_page")
    return act(run, f"topic {topic} not written", back)


@topic_pages.get("/topic/<name>")
def topic_page(name: str) -> str:
    detail, error = read(lambda: topic_detail(console().namesrv, name), f"topic {name} not read")
    return render_template("topic.html", name=name, detail=detail, error=error)


@topic_pages.post("/topic/<name>/delete")
def topic_delete(name: str) -> Response:
    def run() -> str:
        brokers = delete_topic(console().namesrv, name)
        return f"topic {name} deleted from {', '.join(brokers) or 'no broker'} and the name server"

    return act(run, f"topic {name} not deleted", url_for("topics.topics_page"))


@topic_pages.post("/topic/<name>/send")
def topic_send(name: str) -> Response:
    f = request.form

    def run() -> str:
        r = send_test_message(console().namesrv, name, f.get("body", ""),
                              f.get("tags", "").strip(), f.get("keys", "").strip())  # fmt: skip
        return (f"{r.status}: msgId {r.msg_id}, offsetMsgId {r.offset_msg_id}, "
                f"{r.broker} queue {r.queue_id} offset {r.queue_offset}")

    return act(run, "the test message was not sent", url_for("topics.topic_page", name=name))
