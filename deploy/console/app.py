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
MAX_POST_BYTES = 5 * 1024 * 1024  # a form's body: above the broker's 4 MiB message limit
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _host_allowed(server_name: str, host: str) -> bool:
    """A console listening on loopback answers only requests whose Host names loopback (a
    DNS-rebinding page names its own host); one listening elsewhere was exposed on purpose."""
    if server_name not in LOOPBACK_NAMES and not server_name.startswith("127."):
        return True
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name in LOOPBACK_NAMES or name.startswith("127.")


def create_app(namesrv: str, sample_interval_s: float = DEFAULT_INTERVAL_S) -> Flask:
    """The console for the cluster of `namesrv` (host:port); the charts sample the cluster
    every `sample_interval_s` (0: no sampling, no charts)."""
    app = Flask(__name__)
    app.secret_key = secrets.token_bytes(32)  # the flashed messages' cookie, this process only
    app.config["MAX_CONTENT_LENGTH"] = MAX_POST_BYTES
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
        if not _host_allowed(request.environ.get("SERVER_NAME", ""), request.host):
            abort(400, "this console answers to its own address only (a page that renamed "
                       "itself to reach it is refused)")  # fmt: skip
        if request.method == "POST":
            site = request.headers.get("Sec-Fetch-Site")
            origin = request.headers.get("Origin")
            if (site is not None and site not in ("same-origin", "none")) or (
                    origin is not None and origin != request.host_url.rstrip("/")):
                abort(403, "a post from another site is refused")
            sent = request.form.get(CSRF_FIELD, "")
            if not hmac.compare_digest(sent.encode(), console.csrf_token.encode()):
                abort(403, "the form's token is missing or wrong: a page of another site "
                           "cannot post to this console")  # fmt: skip

    @app.after_request
    def guard(resp: Response) -> Response:
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Content-Security-Policy"] = (
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
        return resp

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
