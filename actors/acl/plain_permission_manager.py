"""The accounts of plain_acl.yml and the check of one request against them.

Mirrors acl/plain/PlainPermissionManager.java and acl/common/Permission.java, RocketMQ 4.9.x.
The files: `$ROCKETMQ_HOME/conf/plain_acl.yml` (or `rocketmq.acl.plain.file` relative to the
home) and every `*.yml` / `*.yaml` under `$ROCKETMQ_HOME/conf/acl`, recursively. An access key
defined in two files counts where it was read first. `globalWhiteRemoteAddresses` of every
file admit an address without a signature; an account's `whiteRemoteAddress` admits its own.

validate(): a global white address passes; else the AccessKey must name an account, whose
white address passes; else the Signature must be the one computed with its secret key over
the request's content; then (unless the only resource is a PUB of the trace topic) an admin
code needs an admin account, and each resource the request touches needs its permission:
the account's own for that topic or group (groups are named by their %RETRY% topic), else
its default for topics or groups. Refusals raise AclError with Java's messages.

Pure: the files are read by `load()` / `reload_if_changed()`, whose caller chooses when (the
broker's actor: when the files' stamps change, as Java's AclFileWatchService).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from actors.acl.acl_yaml import YamlError, dumps, loads
from actors.acl.remote_address_strategy import (
    AclError,
    RemoteAddressStrategy,
    remote_address_strategy,
)
from protocol.acl import signatures_equal, signer_for
from protocol.codes import RETRY_GROUP_TOPIC_PREFIX, RequestCode, retry_topic
from protocol.record import java_string_hash

log = logging.getLogger(__name__)

DENY: Final = 1
ANY: Final = 1 << 1
PUB: Final = 1 << 2
SUB: Final = 1 << 3
ADMIN_CODES: Final = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
})  # fmt: skip
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC
KEY_MIN_LENGTH: Final = 6  # ACCESS_KEY_MIN_LENGTH, SECRET_KEY_MIN_LENGTH: longer than this
DEFAULT_ACL_FILE: Final = "conf/plain_acl.yml"
# Java's system property naming the default file, relative to the home (4.9.x
# PlainPermissionManager); ours is the broker's and the name server's property of that name
ACL_PLAIN_FILE_PROPERTY: Final = "rocketmq.acl.plain.file"


def signature_failed(access_key: str) -> str:
    """The refusal of a request whose Signature is not its account's."""
    return f"Check signature failed for accessKey={access_key}"


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def parse_perm(text: str | None) -> int:
    """Permission.parsePermFromString: PUB, SUB, PUB|SUB, SUB|PUB; anything else DENY."""
    return {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}.get(
        (text or "").strip(), DENY)


def java_hash_order(keys: Iterable[str]) -> list[str]:
    """The order a java.util.HashMap<String, ?> holding keys (put in this order) iterates
    them: by bucket, then by insertion. checkPerm reports the first resource refused in
    that order."""
    keys = list(keys)
    if len(keys) < 2:
        return keys
    n = 16
    while len(keys) > n * 3 // 4:
        n *= 2

    def bucket(k: str) -> int:
        h = java_string_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (n - 1)

    return sorted(keys, key=bucket)  # stable: insertion order within a bucket


def is_retry_topic(resource: str | None) -> bool:
    return resource is not None and resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def print_resource(resource: str, group: bool) -> str:
    """PlainAccessResource.printStr."""
    return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}" if group else f"topic:{resource}"


@dataclass
class AccessRequest:
    """PlainAccessResource as parsed from one request (PlainAccessValidator.parse)."""

    remote_addr: str | None
    request_code: int
    access_key: str | None = None
    signature: str | None = None
    secret_token: str | None = None
    content: bytes = b""  # the signed fields' values (combineRequestContent without the body)
    body: bytes | memoryview | None = None  # the rest of what the signature covers
    perms: dict[str, int] | None = None

    def need(self, resource: str | None, perm: int) -> None:
        """addResourceAndPerm (a None resource adds nothing)."""
        if resource is None:
            return
        if self.perms is None:
            self.perms = {}
        self.perms[resource] = perm


@dataclass(frozen=True)
class Account:
    """One account of a file (PlainAccessResource as configured)."""

    access_key: str
    secret_key: str
    white_remote_address: str | None
    white: RemoteAddressStrategy
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int] | None = field(default=None, hash=False)


def _as_bool(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() == "true")


def _perm_list(v: Any) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise AclError(f"a resource permission list is not a list: {v!r}")
    return [str(x) for x in v if x is not None]


def build_account(conf: dict[str, Any]) -> Account:
    """buildPlainAccessResource of one `accounts` entry (checkPlainAccessConfig first)."""
    ak, sk = conf.get("accessKey"), conf.get("secretKey")
    if ak is None or sk is None or len(str(ak)) <= KEY_MIN_LENGTH or \
            len(str(sk)) <= KEY_MIN_LENGTH:
        raise AclError(f"The accessKey={ak} and secretKey={sk} cannot be null and length "
                       f"should longer than 6")  # fmt: skip
    perms: dict[str, int] = {}
    for kind, key in ((False, "groupPerms"), (True, "topicPerms")):
        for item in _perm_list(conf.get(key)):
            parts = [p for p in item.split("=") if p]
            if len(parts) != 2:
                raise AclError(f"Parse resource permission failed for "
                               f"{'topic' if kind else 'group'}:{item}")  # fmt: skip
            name = parts[0].strip()
            perms[name if kind else retry_topic(name)] = parse_perm(parts[1])
    white = conf.get("whiteRemoteAddress")
    white_text = None if white is None else str(white)
    return Account(str(ak), str(sk), white_text, remote_address_strategy(white_text),
                   _as_bool(conf.get("admin")), parse_perm(conf.get("defaultTopicPerm")),
                   parse_perm(conf.get("defaultGroupPerm")), perms or None)  # fmt: skip


def acl_files(home: str, acl_file: str = DEFAULT_ACL_FILE) -> list[str]:
    """getAllAclFiles of conf/acl (recursively), then the default file when it exists."""
    found: list[str] = []

    def walk(path: str) -> None:
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return
        for name in names:
            full = os.path.join(path, name)
            if name.endswith((".yml", ".yaml")) and os.path.isfile(full):
                found.append(os.path.abspath(full))
            elif os.path.isdir(full):
                walk(full)

    walk(os.path.join(home, "conf", "acl"))
    default = os.path.abspath(os.path.join(home, acl_file))
    if os.path.isfile(default) and default not in found:
        found.append(default)
    return found


def stamps(files: Iterable[str]) -> tuple[tuple[str, int, int], ...]:
    """(path, mtime ns, size) of each file: what a reload compares."""
    out = []
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            continue
        out.append((f, st.st_mtime_ns, st.st_size))
    return tuple(out)


class PlainPermissionManager:
    """The accounts and global white addresses of the ACL files under `home`."""

    def __init__(self, home: str, acl_file: str = DEFAULT_ACL_FILE,
                 admin_codes: frozenset[int] = ADMIN_CODES) -> None:  # fmt: skip
        self.home = home
        self.acl_file = acl_file
        self.admin_codes = admin_codes  # the codes only an admin account may send
        self.accounts: dict[str, Account] = {}
        self.account_file: dict[str, str] = {}
        self.global_white: list[RemoteAddressStrategy] = []
        self.global_white_text: dict[str, list[str]] = {}  # per file, as written
        self.data_version: dict[str, dict[str, Any]] = {}  # per file
        self.loaded: tuple[tuple[str, int, int], ...] = ()
        self.generation = 0  # bumped by every load: a decision kept from before is stale

    @property
    def default_file(self) -> str:
        return os.path.abspath(os.path.join(self.home, self.acl_file))

    def load(self) -> None:
        """Read every ACL file; AclError / YamlError (naming the file) leaves the last good
        configuration in place."""
        files = acl_files(self.home, self.acl_file)
        loaded = stamps(files)
        accounts: dict[str, Account] = {}
        account_file: dict[str, str] = {}
        global_white: list[RemoteAddressStrategy] = []
        global_white_text: dict[str, list[str]] = {}
        data_version: dict[str, dict[str, Any]] = {}
        for path in files:
            try:
                with open(path, encoding="utf-8") as fh:
                    data = loads(fh.read())
                whites = [str(w) for w in _perm_list(data.get("globalWhiteRemoteAddresses"))]
                strategies = [remote_address_strategy(w) for w in whites]
                entries = data.get("accounts") or []
                if not isinstance(entries, list):
                    raise AclError("accounts is not a list")
                built = [build_account(e) for e in entries if isinstance(e, dict)]
            except (OSError, YamlError, AclError) as exc:
                raise AclError(f"{path}: {exc}") from exc
            global_white_text[path] = whites
            global_white.extend(strategies)
            for acc in built:
                if acc.access_key in accounts:
                    log.warning("The accessKey %s is repeated in multiple ACL files",
                                acc.access_key)  # fmt: skip
                    continue
                accounts[acc.access_key] = acc
                account_file[acc.access_key] = path
            versions = data.get("dataVersion")
            first = versions[0] if isinstance(versions, list) and versions else None
            data_version[path] = first if isinstance(first, dict) else {}
        self.accounts, self.account_file = accounts, account_file
        self.global_white, self.global_white_text = global_white, global_white_text
        self.data_version, self.loaded = data_version, loaded
        self.generation += 1

    def changed(self) -> bool:
        """Whether the files differ from what was loaded (added, removed, rewritten)."""
        return stamps(acl_files(self.home, self.acl_file)) != self.loaded

    def reload_if_changed(self) -> bool:
        """Load again when the files changed (True); a bad file keeps the last good
        configuration and is logged once per change."""
        if not self.changed():
            return False
        try:
            self.load()
        except AclError as exc:
            self.loaded = stamps(acl_files(self.home, self.acl_file))  # logged once
            log.error("ACL files not reloaded, the last good configuration stays: %s", exc)
            return False
        log.info("ACL files reloaded: %d accounts, %d global white addresses",
                 len(self.accounts), len(self.global_white))  # fmt: skip
        return True

    def validate(self, req: AccessRequest) -> None:
        """PlainPermissionManager.validate: return when the request may go on, else AclError."""
        acc = self.admit(req.remote_addr, req.access_key)
        if acc is None:
            return
        if not signatures_equal(signer_for(acc.secret_key).signature(req.content, req.body),
                                req.signature):  # fmt: skip
            raise AclError(signature_failed(acc.access_key))
        self.check_resources(req, acc)

    def admit(self, remote_addr: str | None, access_key: str | None) -> Account | None:
        """validate's steps before the signature: None when the address alone lets the
        request through (a global white address, or the account's own), else the account
        whose signature the request must carry; AclError when there is no such account."""
        addr = remote_addr or ""
        for white in self.global_white:
            if white.match(addr):
                return None
        if access_key is None:
            raise AclError("No accessKey is configured")
        acc = self.accounts.get(access_key)
        if acc is None:
            raise AclError(f"No acl config for {access_key}")
        if acc.white.match(addr):
            return None
        return acc

    def check_resources(self, req: AccessRequest, acc: Account) -> None:
        """validate's steps after a good signature: AclError when acc may not do req."""
        if req.perms is not None and req.perms.get(TRACE_TOPIC) == PUB:
            return
        self.check_perm(req, acc)

    def check_perm(self, req: AccessRequest, acc: Account) -> None:
        """checkPerm: the admin codes, then each resource's permission."""
        if req.request_code in self.admin_codes and not acc.admin:
            raise AclError(f"Need admin permission for request code={req.request_code}, but "
                           f"accessKey={acc.access_key} is not")  # fmt: skip
        if req.perms is None or (acc.perms is None and acc.admin):
            return
        for resource in java_hash_order(req.perms):
            needed = req.perms[resource]
            group = is_retry_topic(resource)
            owned = acc.perms.get(resource) if acc.perms is not None else None
            if owned is None:
                owned = acc.default_group_perm if group else acc.default_topic_perm
            if not check_permission(needed, owned):
                raise AclError(f"No default permission for {print_resource(resource, group)}")

    # -- the ACL admin codes: the files changed in place ----------------------------------------
    def update_access_config(self, conf: dict[str, Any]) -> None:
        """updateAccessConfig: replace the account of conf's accessKey in the file that holds it
        (or add it to the default file), bump that file's dataVersion, reload. AclError when
        the account or a permission is malformed."""
        self.load()
        build_account(conf)  # checkPlainAccessConfig and the resource permissions' shape
        for key in ("topicPerms", "groupPerms"):
            for item in _perm_list(conf.get(key)):
                parts = [p for p in item.split("=") if p]
                if len(parts) != 2:
                    raise AclError(f"Parse Resource format error for {item}.\nThe expected "
                                   f"resource format is 'Res=Perm'. For example: topicA=SUB")
                if parts[1].strip() != "DENY" and parse_perm(parts[1]) == DENY:
                    raise AclError(f"Parse resource permission error for {item}.\nThe expected "
                                   f"permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")
        ak = str(conf["accessKey"])
        path = self.account_file.get(ak, self.default_file)
        data = self._read(path)
        accounts = data.get("accounts")
        if not isinstance(accounts, list):
            accounts = []
        for i, acc in enumerate(accounts):
            if isinstance(acc, dict) and acc.get("accessKey") == ak:
                merged = dict(acc)
                merged.update({k: v for k, v in conf.items() if v not in (None, "")})
                accounts[i] = merged
                break
        else:
            accounts.append({k: v for k, v in conf.items() if v not in (None, "")})
        data["accounts"] = accounts
        self._write(path, data)

    def delete_access_config(self, access_key: str) -> bool:
        """deleteAccessConfig: drop the account from its file; False when no file holds it."""
        self.load()
        path = self.account_file.get(access_key)
        if not access_key or path is None:
            return False
        data = self._read(path)
        accounts = data.get("accounts")
        if not isinstance(accounts, list):
            return False
        kept = [a for a in accounts if not (isinstance(a, dict) and a.get("accessKey") ==
                                             access_key)]  # fmt: skip
        if len(kept) == len(accounts):
            return False
        data["accounts"] = kept
        self._write(path, data)
        return True

    def update_global_white_addrs(self, addrs: list[str], path: str | None = None) -> bool:
        """updateGlobalWhiteAddrsConfig: the white list of one ACL file under the home (the
        default file when none is named); False for a file elsewhere or missing."""
        target = os.path.abspath(path or self.default_file)
        home = os.path.abspath(self.home) + os.sep
        if not target.startswith(home) or not os.path.isfile(target) or \
                not target.endswith((".yml", ".yaml")):
            return False
        for addr in addrs:
            remote_address_strategy(addr)  # a bad entry is refused before the file changes
        data = self._read(target)
        data["globalWhiteRemoteAddresses"] = list(addrs)
        self._write(target, data)
        return True

    def access_configs(self) -> list[dict[str, Any]]:
        """Every account as its file has it, without its secret key (each file read afresh;
        a file that no longer parses is left out)."""
        out: list[dict[str, Any]] = []
        for path in acl_files(self.home, self.acl_file):
            try:
                entries = self._read(path).get("accounts") or []
            except AclError:
                continue
            for e in entries if isinstance(entries, list) else []:
                if isinstance(e, dict) and e.get("accessKey") is not None:
                    out.append({k: v for k, v in e.items() if k != "secretKey"})
        return out

    def versions(self) -> dict[str, dict[str, int]]:
        """getAllAclConfigVersion: each file's {counter, timestamp}."""
        out: dict[str, dict[str, int]] = {}
        for path, v in self.data_version.items():
            try:
                out[path] = {"counter": int(v.get("counter", 0)),
                             "timestamp": int(v.get("timestamp", 0))}
            except (TypeError, ValueError):
                out[path] = {"counter": 0, "timestamp": 0}
        return out

    def _read(self, path: str) -> dict[str, Any]:
        try:
            with open(path, encoding="utf-8") as fh:
                return loads(fh.read())
        except FileNotFoundError:
            return {}
        except (OSError, YamlError) as exc:
            raise AclError(f"{path}: {exc}") from exc

    def _write(self, path: str, data: dict[str, Any]) -> None:
        """The file rewritten whole (a temporary file renamed over it) with the next
        dataVersion, then every file loaded again."""
        version = self.data_version.get(path) or {}
        try:
            counter = int(version.get("counter", 0)) + 1
        except (TypeError, ValueError):
            counter = 1
        data["dataVersion"] = [{"counter": counter, "timestamp": time.time_ns() // 1_000_000}]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(dumps(data))
        os.replace(tmp, path)
        self.load()
