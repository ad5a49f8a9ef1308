"""`actormq console`: the web console and /metrics of a RocketMQ 4.x cluster.

Serves deploy.console.app on --host:--port (127.0.0.1:8080 by default: nothing is exposed
beyond this host unless asked) with a threaded WSGI server, until SIGTERM / Ctrl-C. Requests
to the cluster are signed with --access-key / --secret-key (or ACTORMQ_ACCESS_KEY /
ACTORMQ_SECRET_KEY) and use TLS with --use-tls, as the admin CLI's.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any

from deploy.config import ACCESS_KEY_ENV, SECRET_KEY_ENV
from deploy.console.history import DEFAULT_INTERVAL_S

EXIT_USAGE = 2
DEFAULT_PORT = 8080


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="actormq console", description=__doc__.splitlines()[0])
    p.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
                   help="name server host:port (default: $NAMESRV_ADDR or 127.0.0.1:9876)")
    p.add_argument("--host", default="127.0.0.1", help="listen address (default loopback)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"listen port (default {DEFAULT_PORT}; 0 = any free port)")
    p.add_argument("--access-key", default=os.environ.get(ACCESS_KEY_ENV))
    p.add_argument("--secret-key", default=os.environ.get(SECRET_KEY_ENV))
    p.add_argument("--use-tls", action="store_true", help="TLS to the name server and brokers")
    p.add_argument("--sample-interval", type=float, default=DEFAULT_INTERVAL_S, metavar="SECONDS",
                   help=f"how often the charts sample the cluster (default {DEFAULT_INTERVAL_S:g};"
                        " 0 = no charts)")
    return p


def serve(app: Any, host: str, port: int, stop: threading.Event,
          ready: Any = None) -> None:  # fmt: skip
    """Serve `app` until `stop` is set (`ready(port)` once listening)."""
    from werkzeug.serving import make_server

    server = make_server(host, port, app, threaded=True)
    if ready is not None:
        ready(server.server_port)
    worker = threading.Thread(target=server.serve_forever, name="console", daemon=True)
    worker.start()
    try:
        stop.wait()
    finally:
        server.shutdown()
        worker.join(5.0)


class ConsoleThread:
    """The console served from a thread of another process (`actormq up`'s launcher)."""

    def __init__(self, namesrv: str, host: str, port: int,
                 sample_interval_s: float = DEFAULT_INTERVAL_S) -> None:  # fmt: skip
        from werkzeug.serving import make_server

        from deploy.console.app import console_of, create_app

        app = create_app(namesrv, sample_interval_s)
        self.console = console_of(app)
        self.server = make_server(host, port, app, threaded=True)
        self.port = int(self.server.server_port)
        self.thread = threading.Thread(target=self.server.serve_forever, name="console",
                                       daemon=True)  # fmt: skip
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(5.0)
        self.console.stop()


def main(argv: list[str]) -> int:
    from actors.runtime.tls import TlsConfig
    from deploy.admin_ext import CLIENT
    from deploy.console.app import console_of, create_app
    from protocol.acl import SessionCredentials

    args = build_parser().parse_args(argv)
    if (args.access_key is None) != (args.secret_key is None):
        sys.stderr.write("actormq console: pass both --access-key and --secret-key\n")
        return EXIT_USAGE
    if args.sample_interval < 0:
        sys.stderr.write("actormq console: --sample-interval must be 0 or more seconds\n")
        return EXIT_USAGE
    if not 0 <= args.port <= 65535:
        sys.stderr.write(f"actormq console: --port {args.port} is not a port\n")
        return EXIT_USAGE
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s",
                        stream=sys.stderr)  # fmt: skip
    CLIENT.credentials = SessionCredentials.of(args.access_key, args.secret_key)
    if args.use_tls:
        CLIENT.tls = TlsConfig.from_properties({"tls.enable": "true"})
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def ready(port: int) -> None:
        sys.stdout.write(f"console listening on http://{args.host}:{port}/ "
                         f"(name server {args.namesrv})\n")
        sys.stdout.flush()

    app = create_app(args.namesrv, args.sample_interval)
    try:
        serve(app, args.host, args.port, stop, ready)
    except OSError as exc:
        sys.stderr.write(f"actormq console: cannot listen on {args.host}:{args.port}: {exc}\n")
        return EXIT_USAGE
    finally:
        console_of(app).stop()
    return 0
