"""`actormq` command line: up, namesrv, broker -c broker.conf, admin <command>, bench, producer,
consumer.

Mirrors namesrv/NamesrvStartup.java and broker/BrokerStartup.java, RocketMQ 4.9.x: `-c` reads
a Java properties file with RocketMQ's property names, command-line options override it, a
bad configuration prints a clear message and exits (code 2 here), and a shutdown hook stops
everything cleanly on SIGTERM / Ctrl-C. A role that keeps dying (actors.runtime.supervisor)
stops everything too, and the command exits EXIT_ROLE_FAILED. Relative paths, in options and
in config files, are taken from the working directory the command was started in. The
broker's config file (the `-c` file; for `up` without one,
<data>/store/config/broker.properties) is also where UPDATE_BROKER_CONFIG persists its changes
(BrokerPathConfigHelper), so the next start reads them; options given on the command line still win.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING

from actors.acl.plain_permission_manager import ACL_PLAIN_FILE_PROPERTY
from actors.runtime.tls import TlsConfig, TlsMode
from deploy.config import (
    ACCESS_KEY_ENV,
    BROKER_PATH_KEYS,
    NAMESRV_PATH_KEYS,
    SECRET_KEY_ENV,
    ConfigError,
    credentials_from_env,
    load_properties,
    resolve_paths,
)
from deploy.launch import LocalCluster, StartError
from deploy.shutdown_hook import (
    EXIT_ROLE_FAILED,
    StartInterrupted,
    serve,
    start_steps,
    stop_event,
)

if TYPE_CHECKING:
    from actors.broker.config import BrokerConfig
    from actors.namesrv.config import NamesrvConfig
    from deploy.console.cli import ConsoleThread
    from protocol.acl import SessionCredentials
    from store.config import StoreConfig

log = logging.getLogger(__name__)

EXIT_BAD_CONFIG = 2
__all__ = ["EXIT_BAD_CONFIG", "EXIT_ROLE_FAILED", "build_parser", "main"]


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {value}")
    return value


def _bridge_port(text: str) -> int:
    """A port, or -1 for no SparkBridge."""
    return -1 if text.strip() == "-1" else _port(text)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    p = argparse.ArgumentParser(prog="actormq", description="RocketMQ 4.x as Thespian actors")
    sub = p.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="name server + one broker on this host")
    up.add_argument("--data", default="./data", help="data directory (store, logs)")
    up.add_argument("--namesrv-port", type=_port, default=None, help="default 9876")
    up.add_argument("--broker-port", type=_port, default=None,
                    help="default: listenPort of the broker's config file, else 10911")
    up.add_argument("--host", default="127.0.0.1", help="listen address for client ports")
    up.add_argument("--admin-port", type=_port, default=None, help="Thespian Admin Port")
    up.add_argument("-c", "--config", default=None,
                    help="optional broker.conf (default: <data>/store/config/broker.properties "
                         "when there, where updateBrokerConfig keeps its changes)")
    up.add_argument("--spark-bridge-port", type=_bridge_port, default=10930,
                    help="SparkBridge port (default 10930; 0 = any free port; -1 = none)")
    up.add_argument("--spark-bridge-host", default="127.0.0.1",
                    help="SparkBridge listen address (default loopback)")
    up.add_argument("--console-port", type=_bridge_port, default=8080,
                    help="web console and /metrics port (default 8080; 0 = any free port; "
                         "-1 = none)")
    up.add_argument("--console-host", default="127.0.0.1",
                    help="console listen address (default loopback)")

    ns = sub.add_parser("namesrv", help="a name server")
    ns.add_argument("-c", "--config", default=None,
                    help="namesrv.properties (NamesrvConfig names: orderMessageEnable, "
                         "kvConfigPath, listenPort, ...)")
    ns.add_argument("-p", "--port", type=_port, default=None, help="listen port (default 9876)")
    ns.add_argument("--host", default="127.0.0.1")
    ns.add_argument("--data", default="./data-namesrv")
    ns.add_argument("--admin-port", type=_port, default=None)

    br = sub.add_parser("broker", help="a broker from a broker.conf")
    br.add_argument("-c", "--config", required=True, help="broker.conf (Java properties)")
    br.add_argument("-n", "--namesrvAddr", default=None)
    br.add_argument("--listenPort", type=_port, default=None)
    br.add_argument("--host", default="127.0.0.1")
    br.add_argument("--admin-port", type=_port, default=None)

    # listed for --help only: main() hands everything after these to their own parsers
    sub.add_parser("admin", help="mqadmin-style tools: `actormq admin --help`")
    sub.add_parser("bench", help="broker benchmark (deploy/bench/broker_bench.py); --reference: "
                                 "beside the reference RocketMQ 4.9.8 in the same invocation, "
                                 "each scenario warmed untimed on both first (--warmup "
                                 "SECONDS); "
                                 "`bench --client`: the client's (deploy/bench/client_bench.py); "
                                 "`bench --consumer`: deploy/bench/consumer_bench.py; "
                                 "`bench --floor`: B's ladder, deploy/bench/send_floor.py")
    sub.add_parser("producer", help="producer benchmark: `actormq producer --help`")
    sub.add_parser("consumer", help="consumer benchmark: `actormq consumer --help`")
    sub.add_parser("spark", help="SparkBridge and pipelines: `actormq spark --help`")
    sub.add_parser("console", help="web console and /metrics: `actormq console --help`")
    return p


def _configs(props: dict[str, str], overrides: dict[str, str | None]
             ) -> tuple[BrokerConfig, StoreConfig]:  # fmt: skip
    """BrokerConfig and StoreConfig from the file's properties and the command line's
    overrides (None: not given), paths made absolute; ConfigError."""
    from actors.broker.config import BrokerConfig
    from store.config import StoreConfig

    merged = dict(props)
    merged.update({k: v for k, v in overrides.items() if v is not None})
    merged = resolve_paths(merged, BROKER_PATH_KEYS)
    try:
        bc = BrokerConfig.from_properties(merged)
        sc = StoreConfig.from_properties(merged)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    if not 0 <= int(bc.listenPort) <= 65535:
        raise ConfigError(f"listenPort out of range: {bc.listenPort}")
    return bc, sc


def _namesrv_config(props: dict[str, str], data: str) -> NamesrvConfig:
    """NamesrvConfig from properties, paths defaulting under data/namesrv; ConfigError."""
    from actors.namesrv.config import NamesrvConfig

    try:
        return NamesrvConfig.from_properties(resolve_paths(props, NAMESRV_PATH_KEYS), data)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None


def _tls_config(props: dict[str, str]) -> TlsConfig:
    """The tls.* settings of a config file (and of its tls.config.file); ConfigError."""
    try:
        return TlsConfig.from_properties(props)
    except (ValueError, OSError) as exc:
        raise ConfigError(str(exc)) from None


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _vip(cluster: LocalCluster, host: str) -> str:
    """'VIP host:port' of the only broker, or 'VIP off'."""
    fast = cluster.broker_fast_port()
    return f"VIP {host}:{fast}" if fast else "VIP off"


def cmd_up(args: argparse.Namespace) -> int:
    """Name server and one broker in one actor system, until SIGTERM / Ctrl-C."""
    from deploy import launch

    data = launch.writable_dir(args.data, "the data directory")
    if args.config:
        conf = os.path.abspath(args.config)
        props = load_properties(conf)
    else:  # the file updateBrokerConfig wrote in an earlier run, if any
        conf = os.path.join(data, "store", "config", "broker.properties")
        props = load_properties(conf) if os.path.isfile(conf) else {}
    ns_port = 9876 if args.namesrv_port is None else args.namesrv_port
    bc, sc = _configs(props, {
        "listenPort": None if args.broker_port is None else str(args.broker_port),
        "namesrvAddr": props.get("namesrvAddr") or f"127.0.0.1:{ns_port}",
        "storePathRootDir": props.get("storePathRootDir") or os.path.join(data, "store"),
        "brokerConfigPath": conf,
    })
    if args.host not in ("127.0.0.1", "0.0.0.0", "localhost") and "brokerIP1" not in props:
        bc = bc.replace(brokerIP1=args.host)
    launch.check_store_paths(sc)  # before anything starts
    # one switch for the host: the broker's ACL also closes the name server's write codes
    ns_props = {"listenPort": str(ns_port), "aclEnable": str(bc.aclEnable).lower(),
                "rocketmqHome": bc.acl_home, ACL_PLAIN_FILE_PROPERTY: bc.aclPlainFile}
    ns_config = _namesrv_config(ns_props, data)
    tls = _tls_config(props)  # one host: the same TLS settings for every port of `up`
    if tls.server_mode is TlsMode.ENFORCING and not tls.enable:
        tls = tls.replace(enable=True)  # the broker and bridge reach our own enforcing ports
    # a bad ACL file first: the root cause
    launch.check_acl(bc.aclEnable, bc.acl_home, bc.aclPlainFile)
    bridge_keys = credentials_from_env() if args.spark_bridge_port >= 0 else None
    if bc.aclEnable and args.spark_bridge_port >= 0 and bridge_keys is None:
        raise ConfigError(
            "aclEnable: the Spark bridge registers itself on the name server, which then needs "
            f"an admin account: set {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or pass "
            "--spark-bridge-port -1")
    reserved = {ns_port, args.spark_bridge_port, *launch.broker_ports(bc, sc)}
    cluster = launch.start_system(data, admin_port=args.admin_port, reserved=reserved)
    stop = stop_event()  # after the fork of Thespian's admin: it keeps its own
    consoles: list[ConsoleThread] = []  # the one the start steps made, if any

    def steps() -> None:
        ns_port = launch.start_namesrv(cluster, host=args.host, config=ns_config, tls=tls)
        _say(f"name server listening on {args.host}:{ns_port} (TLS {tls.server_mode.value})")
        port = launch.start_broker(cluster, bc, sc, host=args.host, tls=tls)
        _say(f"broker {bc.brokerName} listening on {args.host}:{port} "
             f"({_vip(cluster, args.host)}, TLS {tls.server_mode.value}, "
             f"store {sc.storePathRootDir}, logs {data})")
        if args.spark_bridge_port >= 0:
            bport = launch.start_spark_bridge(cluster, bc.namesrvAddr,
                                              host=args.spark_bridge_host,
                                              port=args.spark_bridge_port,
                                              credentials=bridge_keys, tls=tls)  # fmt: skip
            _say(f"spark bridge listening on {args.spark_bridge_host}:{bport}")
        if args.console_port >= 0:
            consoles.extend(_start_console(bc.namesrvAddr, args, bridge_keys, tls))

    try:
        start_steps(cluster, stop, steps)
        code = serve(cluster, stop)
        _say("shutting down")
    finally:
        for console in consoles:
            console.stop()
        launch.stop_cluster(cluster)
    return code


def _start_console(namesrv: str, args: argparse.Namespace, keys: SessionCredentials | None,
                   tls: TlsConfig) -> list[ConsoleThread]:  # fmt: skip
    """The console in a thread of this process, signing and using TLS as the bridge does; a
    port it cannot take is reported and the cluster serves on without it (no console)."""
    from deploy.admin_ext import CLIENT
    from deploy.console.cli import ConsoleThread

    CLIENT.credentials, CLIENT.tls = keys, (tls if tls.enable else None)
    try:
        console = ConsoleThread(namesrv, args.console_host, args.console_port)
    except OSError as exc:
        _say(f"console not started: {args.console_host}:{args.console_port}: {exc}")
        return []
    _say(f"console listening on http://{args.console_host}:{console.port}/")
    return [console]


def cmd_namesrv(args: argparse.Namespace) -> int:
    """A name server until SIGTERM / Ctrl-C."""
    from deploy import launch

    data = os.path.abspath(args.data)
    props = load_properties(args.config) if args.config else {}
    if args.port is not None:
        props["listenPort"] = str(args.port)
    config = _namesrv_config(props, data)
    tls = _tls_config(props)
    cluster = launch.start_system(data, admin_port=args.admin_port, reserved={config.listenPort})
    stop = stop_event()  # after the fork of Thespian's admin: it keeps its own
    def steps() -> None:
        port = launch.start_namesrv(cluster, host=args.host, config=config, tls=tls)
        _say(f"name server listening on {args.host}:{port} (TLS {tls.server_mode.value})")

    try:
        start_steps(cluster, stop, steps)
        code = serve(cluster, stop)
    finally:
        launch.stop_cluster(cluster)
    return code


def cmd_broker(args: argparse.Namespace) -> int:
    """A broker from broker.conf until SIGTERM / Ctrl-C."""
    from deploy import launch

    conf = os.path.abspath(args.config)
    props = load_properties(conf)
    bc, sc = _configs(props, {
        "namesrvAddr": args.namesrvAddr,
        "listenPort": None if args.listenPort is None else str(args.listenPort),
        "brokerConfigPath": conf,  # where updateBrokerConfig persists: the next start reads it
    })
    data = os.path.dirname(os.path.abspath(sc.storePathRootDir)) or "."
    tls = _tls_config(props)
    launch.check_store_paths(sc)  # before anything starts
    cluster = launch.start_system(os.path.join(data, "logs"), admin_port=args.admin_port,
                                  reserved=launch.broker_ports(bc, sc))
    stop = stop_event()  # after the fork of Thespian's admin: it keeps its own
    def steps() -> None:
        port = launch.start_broker(cluster, bc, sc, host=args.host, tls=tls)
        _say(f"broker {bc.brokerName} listening on {args.host}:{port} "
             f"({_vip(cluster, args.host)}, TLS {tls.server_mode.value})")

    try:
        start_steps(cluster, stop, steps)
        code = serve(cluster, stop)
    finally:
        launch.stop_cluster(cluster)
    return code


def main(argv: list[str] | None = None) -> int:
    """Entry point of `actormq` and `python -m deploy`."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["admin"]:
        from deploy.admin import main as admin_main

        return admin_main(argv[1:])
    if argv[:1] == ["producer"]:
        from deploy.benchmark_producer import main as producer_main

        return producer_main(argv[1:])
    if argv[:1] == ["consumer"]:
        from deploy.benchmark_consumer import main as consumer_main

        return consumer_main(argv[1:])
    if argv[:1] == ["console"]:
        from deploy.console.cli import main as console_main

        return console_main(argv[1:])
    if argv[:1] == ["spark"]:
        from deploy.spark.cli import main as spark_main

        return spark_main(argv[1:])
    if argv[:1] == ["bench"]:  # everything after `bench` belongs to the benchmark's parser
        if argv[1:2] == ["--consumer"]:
            from deploy.bench.consumer_bench import main as consumer_bench_main

            return int(consumer_bench_main(argv[2:]) or 0)
        if argv[1:2] == ["--client"]:
            from deploy.bench.client_bench import main as client_bench_main

            return int(client_bench_main(argv[2:]) or 0)
        if argv[1:2] == ["--floor"]:
            from deploy.bench.send_floor import main as floor_main

            return int(floor_main(argv[2:]) or 0)
        from deploy.bench.broker_bench import main as bench_main

        return int(bench_main(argv[1:]) or 0)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    try:
        if args.command == "up":
            return cmd_up(args)
        if args.command == "namesrv":
            return cmd_namesrv(args)
        if args.command == "broker":
            return cmd_broker(args)
    except ConfigError as exc:
        sys.stderr.write(f"actormq: bad configuration: {exc}\n")
        return EXIT_BAD_CONFIG
    except StartError as exc:
        sys.stderr.write(f"actormq: cannot start: {exc}\n")
        return EXIT_BAD_CONFIG
    except StartInterrupted as exc:  # stopped as asked, before it was up
        sys.stderr.write(f"actormq: {exc} while starting: stopped\n")
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
