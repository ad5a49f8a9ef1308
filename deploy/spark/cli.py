"""`actormq spark bridge | list | run`: the SparkBridge beside any RocketMQ 4.x cluster, its
registry of queries, and the pipelines shipped with actormq on any Spark master.

Mirrors the shape of tools/command/MQAdminStartup.java's sub-commands (a name server given
with -n or NAMESRV_ADDR; bad arguments exit 2 with a message, a server that cannot be
reached or refuses exits 1). `bridge` and `list` need no Spark; `run` needs the spark extra.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Final

from deploy.spark import SAFE_PATH_ENV

log = logging.getLogger(__name__)

DEFAULT_BRIDGE_PORT: Final = 10930
EXIT_FAILED = 1
EXIT_USAGE = 2


class SparkJobError(Exception):
    """The Spark job failed (the message is Spark's, trimmed)."""


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def build_parser() -> argparse.ArgumentParser:
    """The parser of `actormq spark`."""
    p = argparse.ArgumentParser(prog="actormq spark", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="spark_command", required=True)
    ns_help = "name server host:port[;host:port] (default: $NAMESRV_ADDR)"

    br = sub.add_parser("bridge", help="run a SparkBridge beside a RocketMQ 4.x cluster")
    br.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR"), help=ns_help)
    br.add_argument("--host", default="127.0.0.1", help="listen address (default loopback)")
    br.add_argument("-p", "--port", type=int, default=DEFAULT_BRIDGE_PORT,
                    help=f"listen port (default {DEFAULT_BRIDGE_PORT}; 0 = any free port)")
    br.add_argument("--advertise", default="",
                    help="host:port registered on the name server (default: host:port)")
    br.add_argument("--data", default="./data-spark-bridge", help="logs directory")
    br.add_argument("--admin-port", type=int, default=None, help=argparse.SUPPRESS)

    ls = sub.add_parser("list", help="queries attached to a SparkBridge, with progress and lag")
    ls.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR"), help=ns_help)
    ls.add_argument("-b", "--bridge", default=None, help="bridge host:port (default: the one "
                                                         "registered on the name server)")

    run = sub.add_parser("run", help="run a shipped pipeline (tag-counts)")
    run.add_argument("pipeline", choices=["tag-counts"])
    run.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR"), help=ns_help)
    run.add_argument("-t", "--topic", required=True, help="the topic to count")
    run.add_argument("--result-topic", default=None, help="write one message per minute & tag")
    run.add_argument("--parquet", default=None, help="write the counts to this Parquet path")
    run.add_argument("--master", default="local[2]", help="any Spark master (default local[2])")
    run.add_argument("--starting-offsets", default="earliest")
    run.add_argument("--ending-offsets", default="latest", help="batch runs only")
    run.add_argument("--sub-expression", default="*", help="tags to count (a || b)")
    run.add_argument("--bridge", default=None, help="bridge host:port (default: registered)")
    run.add_argument("--mode", default="overwrite", choices=["overwrite", "append"],
                     help="Parquet save mode of a batch run")  # fmt: skip
    run.add_argument("--stream", action="store_true", help="a streaming query (needs "
                                                           "--checkpoint)")
    run.add_argument("--checkpoint", default=None)
    run.add_argument("--trigger", default="available-now",
                     help="available-now, or a processing-time interval ('10 seconds')")
    run.add_argument("--lateness", default="1 minute", help="watermark delay (stream)")
    run.add_argument("--max-offsets-per-trigger", type=int, default=None)
    run.add_argument("--time-column", default="storeTimestamp",
                     choices=["storeTimestamp", "bornTimestamp"],
                     help="the minute of the broker's clock (default) or the producer's")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                     help="extra Spark configuration (repeatable)")
    return p


def cmd_bridge(a: argparse.Namespace) -> int:
    """A SparkBridge in its own actor system until SIGTERM / Ctrl-C."""
    from deploy import launch
    from deploy.config import credentials_from_env
    from deploy.shutdown_hook import serve, start_steps, stop_event

    keys = credentials_from_env()  # ACL on the name server: its KV entry needs an admin
    cluster = launch.start_system(os.path.abspath(a.data), admin_port=a.admin_port)
    stop = stop_event()  # after the fork of Thespian's admin: it keeps its own
    def steps() -> None:
        port = launch.start_spark_bridge(cluster, a.namesrv, host=a.host, port=a.port,
                                         advertise=a.advertise, credentials=keys)  # fmt: skip
        _say(f"spark bridge listening on {a.host}:{port} (name server {a.namesrv})")

    try:
        start_steps(cluster, stop, steps)
        code = serve(cluster, stop)
    finally:
        launch.stop_cluster(cluster)
    return code


def cmd_list(a: argparse.Namespace) -> int:
    """The bridge's registry: one line per attached query."""
    import time

    from actors.spark_bridge.options import parse_name_servers
    from deploy.spark import bridge_client
    from deploy.spark.bridge_client import find_bridge
    from protocol.codes import SparkBridgeCode

    if a.bridge:
        bridge = a.bridge
    else:
        from actors.spark_bridge.options import SourceOptions

        bridge = find_bridge(SourceOptions(parse_name_servers(a.namesrv), ("-",)))
    body = bridge_client.call(bridge, SparkBridgeCode.SPARK_LIST_QUERIES, {})
    rows = body.get("queries", [])
    _say(f"{'#Name':<28} {'#Kind':<6} {'#State':<8} {'#Group':<24} {'#Topics':<24} "
         f"{'#Progress':>16} {'#Queues':>7} {'#Lag':>10} {'#Idle(s)':>8}")
    for r in rows:
        progress = f"{r['batches']} " + ("batches" if r["kind"] == "stream" else "partitions")
        lag = "-" if r["lag"] is None else str(r["lag"])
        _say(f"{r['name']:<28} {r['kind']:<6} {r['state']:<8} {r.get('group') or '-':<24} "
             f"{','.join(r['topics']):<24} {progress:>16} {r['queues']:>7} {lag:>10} "
             f"{r['idleMs'] / 1000:>8.1f}")  # fmt: skip
    _say(f"\n{len(rows)} query(ies) on bridge {bridge} at {time.strftime('%H:%M:%S')}")
    return 0


def spark_session(master: str, app: str, conf: list[str]) -> Any:
    """A SparkSession for a pipeline: workers run this Python (with actormq and pyarrow)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(master).appName(app)
    b = b.config("spark.ui.showConsoleProgress", "false")
    b = b.config("spark.sql.shuffle.partitions", "8")  # --conf overrides it
    b = b.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
    # every Python worker of the job, ours or a UDF's: never import from its working directory
    b = b.config(f"spark.executorEnv.{SAFE_PATH_ENV}", "1")
    if master.startswith("local"):
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--conf {item!r} is not KEY=VALUE")
        b = b.config(key, value)
    return b.getOrCreate()


def cmd_run(a: argparse.Namespace) -> int:
    """Run a shipped pipeline on a Spark master."""
    from deploy.spark import register
    from deploy.spark.pipelines import TagCountsJob, run_tag_counts

    if a.stream and not a.checkpoint:
        raise ValueError("--stream needs --checkpoint DIR")
    if not a.result_topic and not a.parquet:
        raise ValueError("give --result-topic, --parquet or both")
    job = TagCountsJob(
        name_server=a.namesrv, topic=a.topic, result_topic=a.result_topic, parquet=a.parquet,
        starting_offsets=a.starting_offsets, ending_offsets=a.ending_offsets,
        sub_expression=a.sub_expression, bridge=a.bridge, mode=a.mode, stream=a.stream,
        checkpoint=a.checkpoint, trigger=a.trigger, lateness=a.lateness,
        max_offsets_per_trigger=a.max_offsets_per_trigger,
        time_column=a.time_column)  # fmt: skip
    spark = spark_session(a.master, f"actormq {a.pipeline}", a.conf)
    try:
        register(spark)
        rows = run_tag_counts(spark, job)
    except Exception as exc:  # Spark's own errors carry the source's message: show it alone
        if isinstance(exc, ValueError):
            raise
        lines = [ln for ln in str(exc).splitlines() if ln.strip()][:6]
        raise SparkJobError("\n  ".join(lines) or type(exc).__name__) from None
    finally:
        spark.stop()
    _say(f"tag-counts: {rows} (minute, tag) row(s) written" + (
        f" to {a.parquet}" if a.parquet else "") + (
        f" and topic {a.result_topic}" if a.result_topic else ""))  # fmt: skip
    return 0


def main(argv: list[str]) -> int:
    """Run `actormq spark ...`; the exit code."""
    from actors.spark_bridge.options import SourceOptionError, parse_name_servers
    from deploy.config import ConfigError
    from deploy.launch import StartError
    from deploy.shutdown_hook import StartInterrupted
    from deploy.spark.bridge_client import RocketMQSourceError

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.spark_command == "bridge" else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        if args.spark_command != "list" or not args.bridge:
            parse_name_servers(args.namesrv)
        if args.spark_command == "bridge":
            return cmd_bridge(args)
        if args.spark_command == "list":
            return cmd_list(args)
        return cmd_run(args)
    except (SourceOptionError, ValueError, ConfigError) as exc:
        sys.stderr.write(f"actormq spark: {exc}\n")
        return EXIT_USAGE
    except StartError as exc:
        sys.stderr.write(f"actormq spark: cannot start: {exc}\n")
        return EXIT_USAGE
    except StartInterrupted as exc:  # stopped as asked, before it was up
        sys.stderr.write(f"actormq spark: {exc} while starting: stopped\n")
        return 0
    except (RocketMQSourceError, SparkJobError) as exc:
        sys.stderr.write(f"actormq spark {args.spark_command}: {exc}\n")
        return EXIT_FAILED
