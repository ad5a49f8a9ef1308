"""The console's web application: pages and /metrics over a RocketMQ 4.x name server.

Mirrors what apache/rocketmq-dashboard shows and what rocketmq-exporter serves (/metrics),
server-rendered with Flask and Jinja templates (every value escaped). Each page asks the cluster
afresh through the admin codes (deploy/admin_ext, over kept connections); the charts read the
history the sampler keeps. An unreachable cluster or a refused request shows as an error on the
page, never a trace. Every form that changes something carries the console's token, and a post
without it is refused (a page of another site cannot post here).
"""

from __future__ import annotations

import hmac
import logging
import secrets

from flask import Flask, Response, abort, render_template, request
from markupsafe import Markup, escape
from werkzeug.exceptions import HTTPException

from deploy.admin_ext import AdminError
from deploy.console.acl_controller import acl_pages
from deploy.console.actor_metrics import ActorMetrics
from deploy.console.cluster_controller import cluster_pages
from deploy.console.cluster_service import sample
from deploy.console.consumer_controller import consumer_pages
from deploy.console.history import DEFAULT_INTERVAL_S, ClusterSampler, MetricsHistory
from deploy.console.message_controller import message_pages
from deploy.console.message_service import short_preview
from deploy.console.metrics import MetricsCollector, exposition
from deploy.console.pages import Console, when
from deploy.console.topic_controller import topic_pages

log = logging.getLogger(__name__)

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
CSRF_FIELD = "csrf_token"


def create_app(namesrv: str, sample_interval_s: float = DEFAULT_INTERVAL_S) -> Flask:
    """The console for the cluster of `namesrv` (host:port); the charts sample the cluster
    every `sample_interval_s` (0: no sampling, no charts)."""
    app = Flask(__name__)
    app.secret_key = secrets.token_bytes(32)  # the flashed messages' cookie, this process only
    console = Console(namesrv, MetricsHistory(), secrets.token_urlsafe(32))
    if sample_interval_s > 0:
        console.sampler = ClusterSampler(console.history, lambda: sample(namesrv),
                                         sample_interval_s)  # fmt: skip
        console.sampler.start()
    app.extensions["actormq"] = console
    app.add_template_filter(short_preview, "string_preview")
    app.add_template_filter(when, "when")
    collector = MetricsCollector(namesrv)
    actors = ActorMetrics()

    @app.context_processor
    def shared() -> dict[str, object]:
        def csrf_field() -> Markup:
            return Markup('<input type="hidden" name="{}" value="{}">').format(
                CSRF_FIELD, escape(console.csrf_token))

        return {"namesrv": namesrv, "csrf_field": csrf_field}

    @app.before_request
    def check_token() -> None:
        if request.method == "POST":
            sent = request.form.get(CSRF_FIELD, "")
            if not hmac.compare_digest(sent.encode(), console.csrf_token.encode()):
                abort(403, "the form's token is missing or wrong: a page of another site "
                           "cannot post to this console")  # fmt: skip

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[str, int]:
        return render_template("error.html", error=f"{exc.code} {exc.name}: "
                               f"{exc.description}"), exc.code or 500  # fmt: skip

    @app.errorhandler(AdminError)
    def admin_error(exc: AdminError) -> tuple[str, int]:
        return render_template("error.html", error=str(exc)), 502

    @app.errorhandler(Exception)
    def any_error(exc: Exception) -> tuple[str, int]:
        log.exception("console page %s failed", request.path)
        return render_template("error.html", error=f"the console failed on this page "
                               f"({type(exc).__name__}); its log has the details"), 500

    @app.get("/metrics")
    def metrics() -> Response:
        families = actors.families()
        try:
            families = collector.collect() + families
        except (AdminError, ValueError) as exc:  # the cluster part is absent from this scrape
            log.warning("metrics: cluster not scraped: %s", exc)
        return Response(exposition(families), mimetype=None, content_type=PROMETHEUS_TEXT)

    for blueprint in (cluster_pages, topic_pages, consumer_pages, message_pages, acl_pages):
        app.register_blueprint(blueprint)
    return app


def console_of(app: Flask) -> Console:
    console: Console = app.extensions["actormq"]
    return console
