"""The console's message pages: search by topic and time range, key or id; one message with
its body preview, properties, resend and trace; a group's dead-letter queue; message trace.

Mirrors apache/rocketmq-dashboard's MessageController, DlqMessageController and
MessageTraceController.
"""

from __future__ import annotations

import time

from flask import Blueprint, render_template, request, url_for
from werkzeug.wrappers import Response

from deploy.admin_trace import trace_views
from deploy.console.message_service import (
    MAX_MESSAGES,
    MessageView,
    body_preview,
    by_id,
    by_key,
    by_time,
    dlq_topic_of,
    resend_to_group,
)
from deploy.console.pages import act, console, local_input, parse_ms, read
from deploy.console.topic_service import (
    TopicDetail,
    create_or_update_topic,
    topic_detail,
)
from protocol.codes import PermName
from protocol.trace import TRACE_TOPIC

message_pages = Blueprint("messages", __name__)

HOUR_MS = 3_600_000


def _range() -> tuple[str, str]:
    now = time.time() * 1000
    return (request.args.get("begin") or local_input(now - HOUR_MS),
            request.args.get("end") or local_input(now + 60_000))


@message_pages.get("/messages")
def messages_page() -> str:
    c = console()
    args = request.args
    topic = (args.get("topic") or "").strip()
    by = args.get("by", "time")
    key = (args.get("key") or "").strip()
    msg_id = (args.get("msgId") or "").strip()
    begin, end = _range()
    rows, error, capped = [], "", False
    if topic or msg_id:
        if by == "key":
            got, error = read(lambda: by_key(c.namesrv, topic, key), "messages not found")
            rows = got or []
        elif by == "id":
            one, error = read(lambda: by_id(c.namesrv, topic, msg_id), "message not found")
            rows = [one] if one is not None else []
        else:
            got_t, error = read(lambda: by_time(c.namesrv, topic, parse_ms(begin, "the start"),
                                                parse_ms(end, "the end")), "messages not read")
            rows, capped = got_t if got_t is not None else ([], False)
    return render_template("messages.html", topic=topic, by=by, key=key, msg_id=msg_id,
                           begin=begin, end=end, rows=rows, error=error, capped=capped,
                           max_messages=MAX_MESSAGES)  # fmt: skip


@message_pages.get("/message")
def message_page() -> str:
    c = console()
    topic = (request.args.get("topic") or "").strip()
    msg_id = (request.args.get("msgId") or "").strip()
    view, error = read(lambda: by_id(c.namesrv, topic, msg_id), f"message {msg_id} not read")
    preview = body_preview(view.body, request.args.get("as", "")) if view else None
    groups: list[str] = []
    if view is not None:
        detail, _ = read(lambda: topic_detail(c.namesrv, view.topic), "")
        groups = detail.groups if detail is not None else []
    return render_template("message.html", topic=topic, msg_id=msg_id, view=view,
                           preview=preview, groups=groups, error=error)  # fmt: skip


@message_pages.post("/message/resend")
def message_resend() -> Response:
    f = request.form
    topic, msg_id, group = f.get("topic", ""), f.get("msgId", ""), f.get("group", "").strip()

    def run() -> str:
        r = resend_to_group(console().namesrv, topic, msg_id, group,
                            f.get("client_id", "").strip())  # fmt: skip
        return (f"{group} client {r.client_id} consumed it: {r.result}"
                + (f" ({r.remark})" if r.remark else "") + f" in {r.spent_ms} ms")

    return act(run, f"message not resent to {group}",
               url_for("messages.message_page", topic=topic, msgId=msg_id))  # fmt: skip


@message_pages.get("/dlq")
def dlq_page() -> str:
    c = console()
    group = (request.args.get("group") or "").strip()
    begin, end = _range()
    detail: TopicDetail | None = None
    rows: list[MessageView] = []
    error, capped, read_error = "", False, ""
    if group:
        dlq, error = read(lambda: dlq_topic_of(group), "bad group")
        if dlq:
            detail, error = read(lambda: topic_detail(c.namesrv, dlq),
                                 f"group {group} has no dead-letter queue yet")  # fmt: skip
        if detail is not None and dlq:
            got, read_error = read(lambda: by_time(c.namesrv, dlq, parse_ms(begin, "the start"),
                                                   parse_ms(end, "the end")),
                                   "the dead-letter messages not read")  # fmt: skip
            rows, capped = got if got is not None else ([], False)
    readable = bool(detail and all(PermName.is_readable(b[4]) for b in detail.brokers))
    return render_template("dlq.html", group=group, detail=detail, rows=rows, error=error,
                           read_error=read_error, capped=capped, begin=begin, end=end,
                           readable=readable)  # fmt: skip


@message_pages.post("/dlq/readable")
def dlq_readable() -> Response:
    group = request.form.get("group", "").strip()

    def run() -> str:
        dlq = dlq_topic_of(group)
        detail = topic_detail(console().namesrv, dlq)
        queues = str(max((b[2] for b in detail.brokers), default=1))
        create_or_update_topic(console().namesrv, None, dlq, queues, queues, "6", None)
        return f"{dlq} is readable now (perm 6)"

    return act(run, f"the dead-letter queue of {group} not changed",
               url_for("messages.dlq_page", group=group))  # fmt: skip


@message_pages.get("/trace")
def trace_page() -> str:
    msg_id = (request.args.get("msgId") or "").strip()
    topic = (request.args.get("traceTopic") or "").strip() or TRACE_TOPIC
    views, error = [], ""
    if msg_id:
        got, error = read(lambda: trace_views(console().namesrv, msg_id, topic),
                          "trace not read")  # fmt: skip
        views = got or []
        if not views and not error:
            error = f"no trace of message {msg_id} in {topic}"
    return render_template("trace.html", msg_id=msg_id, trace_topic=topic, views=views,
                           error=error)  # fmt: skip
