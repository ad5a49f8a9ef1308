"""The console's ACL page: whether the brokers run ACL, their accounts (never a secret key),
global white addresses and file versions; an account created, changed or deleted.

Mirrors apache/rocketmq-dashboard's AclServiceImpl. The accounts come from
GET_BROKER_CLUSTER_ACL_CONFIG, which RocketMQ 4.7-4.8 served and 4.9 dropped: actormq serves it
(to admin accounts, without secrets); against a 4.9 broker the page shows each file's version
(GET_BROKER_CLUSTER_ACL_INFO) and says the account list is not served. Changes go to every
master with ACL on, as `actormq admin updateAclConfig -c` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from actors.acl.plain_permission_manager import DENY, parse_perm
from deploy.admin_ext import as_text, call, cluster_info, cluster_masters
from deploy.config import parse_properties
from deploy.console.topic_service import ConsoleInputError
from protocol.codes import RequestCode as RC

NOT_SUPPORTED = 3  # REQUEST_CODE_NOT_SUPPORTED
PERMS = ("DENY", "PUB", "SUB", "PUB|SUB")


@dataclass
class AclView:
    enabled_on: list[tuple[str, str]] = field(default_factory=list)  # (broker, addr)
    disabled_on: list[str] = field(default_factory=list)
    accounts: list[dict[str, Any]] = field(default_factory=list)
    global_white: list[str] = field(default_factory=list)
    versions: list[tuple[str, str, int, int]] = field(default_factory=list)  # broker, file, n, ts
    listed: bool = False  # the accounts came from a broker that serves them
    note: str = ""


def _acl_enabled(addr: str) -> bool:
    config = parse_properties(as_text(call(addr, RC.GET_BROKER_CONFIG).body))
    return config.get("aclEnable", "").strip().lower() == "true"


def _acl_masters(namesrv: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(the masters with ACL on, the names of those with it off)."""
    on: list[tuple[str, str]] = []
    off: list[str] = []
    for broker, addr in cluster_masters(cluster_info(namesrv), None):
        if _acl_enabled(addr):
            on.append((broker, addr))
        else:
            off.append(broker)
    return on, off


def acl_view(namesrv: str) -> AclView:
    on, off = _acl_masters(namesrv)
    view = AclView(on, off)
    for broker, addr in view.enabled_on:
        ext = call(addr, RC.GET_BROKER_CLUSTER_ACL_INFO, ok=(0, 1)).ext_fields or {}
        try:
            versions = json.loads(ext.get("allAclFileVersion") or "{}")
        except ValueError:
            versions = {}
        for path, v in sorted(versions.items()):
            view.versions.append((broker, path, int(v.get("counter", 0)),
                                  int(v.get("timestamp", 0))))  # fmt: skip
    if view.enabled_on:
        broker, addr = view.enabled_on[0]
        resp = call(addr, RC.GET_BROKER_CLUSTER_ACL_CONFIG, ok=(0, 1, NOT_SUPPORTED, 16))
        if resp.code == 0:
            body = json.loads(as_text(resp.body) or "{}")
            view.accounts = sorted(
                ({k: v for k, v in a.items() if k != "secretKey"}
                 for a in body.get("plainAccessConfigs") or [] if isinstance(a, dict)),
                key=lambda a: str(a.get("accessKey")))  # fmt: skip
            view.global_white = [str(w) for w in body.get("globalWhiteAddrs") or []]
            view.listed = True
        else:
            view.note = (f"{broker} does not list its accounts (code {resp.code}: "
                         f"{resp.remark or ''}); RocketMQ 4.9 brokers do not serve "
                         "GET_BROKER_CLUSTER_ACL_CONFIG")
    return view


def _perm(text: str, what: str) -> str:
    """A permission the broker reads as written (its parse makes anything else DENY: a typo
    would silently deny, so it is refused here)."""
    if text.strip() != "DENY" and parse_perm(text) == DENY:
        raise ConsoleInputError(f"{what} must be one of {', '.join(PERMS)}, not {text!r}")
    return text


def _resources(text: str, what: str) -> str:
    """name=PERM items, one per line or comma separated, as updateAclConfig's -t / -g."""
    items = [p.strip() for line in text.splitlines() for p in line.split(",") if p.strip()]
    for item in items:
        name, eq, perm = item.partition("=")
        if not eq or not name.strip():
            raise ConsoleInputError(f"{what}: {item!r} is not NAME=PERM")
        _perm(perm.strip(), f"{what} {name}")
    return ",".join(items)


def update_account(namesrv: str, access_key: str, secret_key: str, white: str, admin: bool,
                   topic_perm: str, group_perm: str, topic_perms: str,
                   group_perms: str) -> list[str]:  # fmt: skip
    """updateAclConfig on every master with ACL on: the brokers written."""
    if len(access_key) <= 6 or len(secret_key) <= 6:
        raise ConsoleInputError("the access key and the secret key need more than 6 characters")
    ext = {"accessKey": access_key, "secretKey": secret_key,
           "whiteRemoteAddress": white.strip() or None,
           "defaultTopicPerm": _perm(topic_perm, "default topic permission"),
           "defaultGroupPerm": _perm(group_perm, "default group permission"),
           "topicPerms": _resources(topic_perms, "topic permissions") or None,
           "groupPerms": _resources(group_perms, "group permissions") or None,
           "admin": "true" if admin else "false"}  # fmt: skip
    on, _off = _acl_masters(namesrv)
    if not on:
        raise ConsoleInputError("ACL is off on every broker: there is no account to write")
    for _broker, addr in on:
        call(addr, RC.UPDATE_AND_CREATE_ACL_CONFIG, ext)
    return [b for b, _a in on]


def delete_account(namesrv: str, access_key: str) -> list[str]:
    """deleteAccessConfig on every master with ACL on."""
    if not access_key.strip():
        raise ConsoleInputError("no access key given")
    on, _off = _acl_masters(namesrv)
    if not on:
        raise ConsoleInputError("ACL is off on every broker: there is no account to delete")
    for _broker, addr in on:
        call(addr, RC.DELETE_ACL_CONFIG, {"accessKey": access_key})
    return [b for b, _a in on]
