"""`actormq admin` ACL commands: accounts and the global white list of the brokers' ACL files.

Mirrors tools/command/acl/UpdateAccessConfigSubCommand, DeleteAccessConfigSubCommand,
UpdateGlobalWhiteAddrSubCommand and ClusterAclConfigVersionListSubCommand (their options and
output), RocketMQ 4.9.x. Each goes to the -b broker or to every master of the -c cluster; the
requests are signed with the admin's own --access-key / --secret-key like every command's.
The secret key of the account being written is sent to the broker and printed nowhere.
"""

from __future__ import annotations

import argparse
import json

from deploy.admin_ext import call, echo, targets
from protocol.codes import RequestCode as RC


def cmd_update_acl_config(a: argparse.Namespace) -> int:
    """updateAclConfig: create or change one account (-a, -s, and what else is given)."""
    ext = {"accessKey": a.account_key, "secretKey": a.account_secret,
           "whiteRemoteAddress": a.white_remote_address, "defaultTopicPerm": a.default_topic_perm,
           "defaultGroupPerm": a.default_group_perm, "topicPerms": a.topic_perms,
           "groupPerms": a.group_perms,
           "admin": None if a.admin is None else str(a.admin).lower()}  # fmt: skip
    for _name, addr in targets(a, require=True):
        call(addr, RC.UPDATE_AND_CREATE_ACL_CONFIG, ext)
        echo(f"create or update plain access config to {addr} success.")
    return 0


def cmd_delete_access_config(a: argparse.Namespace) -> int:
    """deleteAccessConfig: remove one account (-a) from its ACL file."""
    for _name, addr in targets(a, require=True):
        call(addr, RC.DELETE_ACL_CONFIG, {"accessKey": a.account_key})
        echo(f"delete plain access config account from {addr} success.")
    return 0


def cmd_update_global_white_addr(a: argparse.Namespace) -> int:
    """updateGlobalWhiteAddr: the default ACL file's globalWhiteRemoteAddresses (-g, comma
    separated)."""
    for _name, addr in targets(a, require=True):
        call(addr, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
             {"globalWhiteAddrs": a.global_white_addrs, "aclFileFullPath": a.acl_file})
        echo(f"update global white remote addresses to {addr} success.")
    return 0


def cmd_cluster_acl_config_version(a: argparse.Namespace) -> int:
    """clusterAclConfigVersion: each broker's ACL file versions."""
    echo(f"{'#Cluster Name':<20}  {'#Broker Name':<20}  {'#Broker Addr':<22}  "
         f"{'#AclFilePath':<50}  {'#AclConfigVersionNum':<20}  #AclLastUpdateTime")
    for _name, addr in targets(a, require=True):
        ext = call(addr, RC.GET_BROKER_CLUSTER_ACL_INFO).ext_fields or {}
        versions = json.loads(ext.get("allAclFileVersion") or "{}")
        for path, v in sorted(versions.items()):
            echo(f"{ext.get('clusterName', ''):<20}  {ext.get('brokerName', ''):<20}  "
                 f"{ext.get('brokerAddr', addr):<22}  {path:<50}  {v.get('counter', 0):<20}  "
                 f"{v.get('timestamp', 0)}")
    return 0


def add_arguments(name: str, s: argparse.ArgumentParser) -> None:
    """The options of the ACL command `name` (mqadmin's letters)."""
    s.add_argument("-b", "--broker", default=None, help="broker address host:port")
    s.add_argument("-c", "--cluster", default=None)
    if name in ("updateAclConfig", "deleteAccessConfig"):
        s.add_argument("-a", "--account-key", required=True, help="the account's access key")
    if name == "updateAclConfig":
        s.add_argument("-s", "--account-secret", required=True,
                       help="the account's secret key (longer than 6)")  # fmt: skip
        s.add_argument("-w", "--white-remote-address", default=None)
        s.add_argument("-i", "--default-topic-perm", default=None, help="DENY, PUB, SUB, PUB|SUB")
        s.add_argument("-u", "--default-group-perm", default=None, help="DENY, PUB, SUB, PUB|SUB")
        s.add_argument("-t", "--topic-perms", default=None, help="topicA=DENY,topicB=PUB|SUB")
        s.add_argument("-g", "--group-perms", default=None, help="groupA=DENY,groupB=SUB")
        s.add_argument("-m", "--admin", type=lambda v: v.lower() == "true", default=None)
    if name == "updateGlobalWhiteAddr":
        s.add_argument("-g", "--global-white-addrs", required=True,
                       help="comma separated, e.g. 10.10.103.*,192.168.0.*")  # fmt: skip
        s.add_argument("--acl-file", default=None, help="the ACL file (default plain_acl.yml)")


ACL_COMMANDS = {
    "updateAclConfig": (cmd_update_acl_config, "create or update an ACL account"),
    "deleteAccessConfig": (cmd_delete_access_config, "delete an ACL account"),
    "updateGlobalWhiteAddr": (cmd_update_global_white_addr, "set the global white addresses"),
    "clusterAclConfigVersion": (cmd_cluster_acl_config_version, "the brokers' ACL versions"),
}
