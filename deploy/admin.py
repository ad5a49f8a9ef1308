"""`actormq admin <command>`: cluster, topic, consumer and message tools in the spirit of mqadmin.

Mirrors tools/command/MQAdminStartup.java (the command table, arguments, exit codes), RocketMQ
4.9.x; the sub-commands (tools/command/*SubCommand.java) live in deploy/admin_topic.py,
admin_consumer.py, admin_message.py, admin_trace.py and admin_broker.py over
deploy/admin_ext.py (DefaultMQAdminExt):
clusterList, brokerStatus, topicList, topicRoute, updateTopic, deleteTopic, consumerProgress,
consumerConnection, consumerStatus, producerConnection, resetOffsetByTime, queryMsgByKey,
queryMsgById, queryMsgTraceById, sendMessage, consumeMessage, updateBrokerConfig,
getBrokerConfig, wipeWritePerm, addWritePerm, and the ACL commands of deploy/admin_acl.py
(updateAclConfig, deleteAccessConfig, updateGlobalWhiteAddr, clusterAclConfigVersion). Each
command
talks to the name server (-n, or the NAMESRV_ADDR environment variable as mqadmin does) and to
the brokers it names, over the RocketMQ protocol (JSON headers), so it works against any
RocketMQ 4.x cluster as well.
With ACL on a broker, --access-key / --secret-key (or ACTORMQ_ACCESS_KEY / ACTORMQ_SECRET_KEY)
sign every request as AclClientRPCHook does. Bad arguments: a message and exit code 2; a
server that cannot be reached or refuses: a message and exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from actors.runtime.tls import TlsConfig
from deploy.admin_acl import ACL_COMMANDS
from deploy.admin_acl import add_arguments as add_acl_arguments
from deploy.admin_broker import (
    cmd_add_write_perm,
    cmd_broker_status,
    cmd_cluster_list,
    cmd_get_broker_config,
    cmd_stats_all,
    cmd_update_broker_config,
    cmd_wipe_write_perm,
)
from deploy.admin_consumer import (
    cmd_consumer_connection,
    cmd_consumer_progress,
    cmd_consumer_status,
    cmd_delete_sub_group,
    cmd_producer_connection,
    cmd_reset_offset,
    cmd_update_sub_group,
)
from deploy.admin_ext import (
    CLIENT,
    EXIT_FAILED,
    EXIT_USAGE,
    AdminError,
    Usage,
)
from deploy.admin_message import cmd_consume, cmd_query_by_id, cmd_query_by_key, cmd_send
from deploy.admin_topic import (
    cmd_delete_topic,
    cmd_topic_list,
    cmd_topic_route,
    cmd_topic_status,
    cmd_update_topic,
)
from deploy.admin_trace import cmd_query_trace_by_id
from deploy.config import ACCESS_KEY_ENV, SECRET_KEY_ENV
from deploy.wire import parse_addr
from protocol.acl import SessionCredentials
from protocol.trace import TRACE_TOPIC

COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {
    "clusterList": (cmd_cluster_list, "list clusters and their brokers"),
    "topicList": (cmd_topic_list, "list every topic of the name server"),
    "topicRoute": (cmd_topic_route, "show a topic's route"),
    "updateTopic": (cmd_update_topic, "create or update a topic"),
    "deleteTopic": (cmd_delete_topic, "delete a topic from a cluster and the name server"),
    "topicStatus": (cmd_topic_status, "a topic's min / max offset per queue"),
    "consumerProgress": (cmd_consumer_progress, "a consumer group's offsets and lag"),
    "updateSubGroup": (cmd_update_sub_group, "create or update a subscription group"),
    "deleteSubGroup": (cmd_delete_sub_group, "delete a subscription group"),
    "queryMsgByKey": (cmd_query_by_key, "find messages by key"),
    "queryMsgById": (cmd_query_by_id, "show a message by its offset message id"),
    "sendMessage": (cmd_send, "send one message"),
    "consumeMessage": (cmd_consume, "pull and print messages"),
    "brokerStatus": (cmd_broker_status, "a broker's runtime figures"),
    "consumerConnection": (cmd_consumer_connection, "a consumer group's clients"),
    "producerConnection": (cmd_producer_connection, "a producer group's clients"),
    "resetOffsetByTime": (cmd_reset_offset, "move a consumer group to a point in time"),
    "consumerStatus": (cmd_consumer_status, "a consumer client's own running info"),
    "updateBrokerConfig": (cmd_update_broker_config, "set a broker property at runtime"),
    "getBrokerConfig": (cmd_get_broker_config, "a broker's properties"),
    "statsAll": (cmd_stats_all, "per topic and group: TPS in / out, 24 h counts, lag"),
    "queryMsgTraceById": (cmd_query_trace_by_id, "the trace records of one message"),
    "wipeWritePerm": (cmd_wipe_write_perm, "wipe a broker's write permission on the name servers"),
    "addWritePerm": (cmd_add_write_perm, "give a broker its write permission back"),
    **ACL_COMMANDS,
}


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"not true or false: {text!r}")
    return text.lower() == "true"


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The parser of `actormq admin`."""
    p = argparse.ArgumentParser(prog="actormq admin", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="admin_command", required=True)
    for name, (_fn, help_text) in COMMANDS.items():
        s = sub.add_parser(name, help=help_text)
        s.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR"),
                       help="name server host:port (default: $NAMESRV_ADDR)")  # fmt: skip
        s.add_argument("--access-key", default=os.environ.get(ACCESS_KEY_ENV),
                       help=f"ACL access key to sign requests with (default: ${ACCESS_KEY_ENV})")
        s.add_argument("--secret-key", default=os.environ.get(SECRET_KEY_ENV),
                       help=f"its secret key (default: ${SECRET_KEY_ENV})")  # fmt: skip
        s.add_argument("--use-tls", action="store_true",
                       help="TLS to the name server and brokers (mqadmin: -Dtls.enable=true)")
        s.add_argument("--tls-config", default=None, metavar="FILE",
                       help="tls.properties with tls.client.* / tls.test.mode.enable "
                            "settings (implies --use-tls)")  # fmt: skip
        if name in ACL_COMMANDS:
            add_acl_arguments(name, s)
        if name in ("topicRoute", "updateTopic", "deleteTopic", "queryMsgByKey",
                    "sendMessage", "consumeMessage", "producerConnection",
                    "resetOffsetByTime", "topicStatus"):  # fmt: skip
            s.add_argument("-t", "--topic", required=True)
        if name in ("consumerConnection", "producerConnection", "resetOffsetByTime",
                    "consumerStatus", "updateSubGroup", "deleteSubGroup"):  # fmt: skip
            s.add_argument("-g", "--group", required=True)
        if name in ("brokerStatus", "consumerConnection", "consumerStatus",
                    "updateBrokerConfig", "getBrokerConfig", "updateSubGroup",
                    "deleteSubGroup"):  # fmt: skip
            s.add_argument("-b", "--broker", default=None, help="broker address host:port")
        if name in ("updateBrokerConfig", "getBrokerConfig", "updateSubGroup", "deleteSubGroup"):
            s.add_argument("-c", "--cluster", default=None)
        if name == "updateSubGroup":
            s.add_argument("-r", "--retry-max-times", type=int, default=16)
            s.add_argument("-q", "--retry-queues", type=int, default=1)
            s.add_argument("-s", "--consume-enable", type=_bool, default=True)
            s.add_argument("-m", "--consume-from-min", type=_bool, default=True)
            s.add_argument("-d", "--broadcast", type=_bool, default=True)
        if name == "deleteSubGroup":
            s.add_argument("--remove-offset", action="store_true",
                           help="also drop the group's consumer offsets")  # fmt: skip
        if name == "updateBrokerConfig":
            s.add_argument("-k", "--key", required=True)
            s.add_argument("-v", "--value", required=True)
        if name == "resetOffsetByTime":
            s.add_argument("-s", "--timestamp", required=True,
                           help="ms, now, or yyyy-MM-dd#HH:mm:ss:SSS")  # fmt: skip
            s.add_argument("-f", "--force", type=lambda v: v.lower() == "true", default=True)
        if name == "consumerStatus":
            s.add_argument("-i", "--client-id", required=True)
        if name == "updateTopic":
            s.add_argument("-c", "--cluster", default=None)
            s.add_argument("-b", "--broker", default=None, help="broker address host:port")
            s.add_argument("-r", "--read-queues", type=_positive, default=8)
            s.add_argument("-w", "--write-queues", type=_positive, default=8)
            s.add_argument("-p", "--perm", type=int, choices=(2, 4, 6), default=6)
        if name == "deleteTopic":
            s.add_argument("-c", "--cluster", required=True)
        if name == "consumerProgress":
            s.add_argument("-g", "--group", required=True)
            s.add_argument("-t", "--topic", default=None)
        if name in ("wipeWritePerm", "addWritePerm"):
            s.add_argument("-b", "--broker-name", required=True, help="broker name")
        if name == "statsAll":
            s.add_argument("-t", "--topic", default=None, help="only this topic")
        if name == "queryMsgByKey":
            s.add_argument("-k", "--key", required=True)
            s.add_argument("--max", type=_positive, default=64)
        if name in ("queryMsgById", "queryMsgTraceById"):
            s.add_argument("-i", "--msg-id", required=True)
        if name == "queryMsgTraceById":
            s.add_argument("-t", "--trace-topic", default=TRACE_TOPIC,
                           help=f"the trace topic (default {TRACE_TOPIC})")
        if name == "sendMessage":
            s.add_argument("-p", "--body", required=True)
            s.add_argument("--tags", default=None)
            s.add_argument("--keys", default=None)
            s.add_argument("--property", action="append", metavar="NAME=VALUE",
                           help="a user property (repeatable); system names such as TAGS or "
                                "UNIQ_KEY are refused")  # fmt: skip
            s.add_argument("-b", "--broker", default=None, help="broker name")
            s.add_argument("-q", "--queue", type=int, default=None)
        if name == "consumeMessage":
            s.add_argument("-g", "--group", default=None)
            s.add_argument("-s", "--subscription", default="*")
            s.add_argument("-c", "--count", type=_positive, default=32)
            s.add_argument("--from-start", action="store_true")
    return p


def main(argv: list[str]) -> int:
    """Run one admin command; the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with a message on bad arguments
    try:
        if not args.namesrv:
            raise Usage("no name server: pass -n host:port or set NAMESRV_ADDR")
        for ns in args.namesrv.split(";"):
            parse_addr(ns)
        if getattr(args, "broker", None) and args.admin_command in (
            "updateTopic", "brokerStatus", "consumerConnection", "consumerStatus",
            "updateBrokerConfig", "getBrokerConfig", "updateSubGroup", "deleteSubGroup",
            *ACL_COMMANDS,
        ):
            parse_addr(args.broker)
        if (args.access_key is None) != (args.secret_key is None):
            raise Usage("pass both --access-key and --secret-key (or set both "
                        f"{ACCESS_KEY_ENV} and {SECRET_KEY_ENV})")
    except (Usage, ValueError) as exc:
        sys.stderr.write(f"actormq admin: {exc}\n")
        return EXIT_USAGE
    CLIENT.credentials = SessionCredentials.of(args.access_key, args.secret_key)
    if args.use_tls or args.tls_config:
        props = {"tls.enable": "true"}
        if args.tls_config:
            props["tls.config.file"] = args.tls_config
        try:
            if args.tls_config and not os.path.isfile(args.tls_config):
                raise ValueError(f"no such file: {args.tls_config}")
            CLIENT.tls = TlsConfig.from_properties(props)
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"actormq admin: --tls-config: {exc}\n")
            return EXIT_USAGE
    args.all_namesrv = args.namesrv
    args.namesrv = args.namesrv.split(";")[0]
    try:
        return COMMANDS[args.admin_command][0](args)
    except Usage as exc:
        sys.stderr.write(f"actormq admin: {exc}\n")
        return EXIT_USAGE
    except AdminError as exc:
        sys.stderr.write(f"actormq admin {args.admin_command}: {exc}\n")
        return EXIT_FAILED
    except ValueError as exc:  # a reply that does not parse
        sys.stderr.write(f"actormq admin {args.admin_command}: unreadable reply: {exc}\n")
        return EXIT_FAILED
