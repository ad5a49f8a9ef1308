"""What one request touches, for the ACL check: PlainAccessValidator.parse.

Mirrors acl/plain/PlainAccessValidator.java, RocketMQ 4.9.x. From a request's code, ext
fields, body and remote address: the AccessKey, Signature and SecurityToken it carries, the
resources it needs (a send: its topic's PUB, or its group's SUB when it sends to a %RETRY%
topic; a pull: the topic's and the group's SUB; a heartbeat: every consumer group's and
subscribed topic's SUB; ...), and the content its signature covers. Codes not listed touch no
resource (an admin code then needs only the admin flag). A header field that is missing or is
not a number where Java reads one names no resource (Java's header decode logs it and leaves
the field null); a heartbeat body that does not parse is refused (AclError), as in Java.
One deliberate difference: SEND_BATCH_MESSAGE needs its topic's PUB as a single send does
(RocketMQ 4.9.8 checks no resource for it, so an account that may only subscribe could
publish in batches).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from actors.acl.plain_permission_manager import (
    ADMIN_CODES,
    DEFAULT_ACL_FILE,
    PUB,
    SUB,
    AccessRequest,
    PlainPermissionManager,
    is_retry_topic,
    signature_failed,
)
from actors.acl.remote_address_strategy import AclError
from protocol.acl import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    Signer,
    fields_text,
    signatures_equal,
    signer_for,
    values_text,
)
from protocol.bodies import HeartbeatData
from protocol.codes import RequestCode as RC
from protocol.codes import retry_topic
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)

_NOT_SIGNED = frozenset((SIGNATURE, UNIQUE_MSG_QUERY_FLAG))


def _group_topic(group: str | None) -> str | None:
    return None if group is None else retry_topic(group)


def host_of(remote_addr: str | None) -> str | None:
    """The white-list form of a remote address: what is before its last ':' (the port)."""
    if remote_addr is not None and ":" in remote_addr:
        return remote_addr[: remote_addr.rfind(":")]
    return remote_addr


def parse(code: int, ext: Mapping[str, str] | None, body: bytes | memoryview | None,
          remote_addr: str | None) -> AccessRequest:
    """PlainAccessValidator.parse."""
    req = AccessRequest(host_of(remote_addr), code)
    if ext is None:
        return req  # nothing signed: only a white address can let it through
    req.access_key = ext.get(ACCESS_KEY)
    req.signature = ext.get(SIGNATURE)
    req.secret_token = ext.get(SECURITY_TOKEN)
    try:
        _resources(req, code, ext, body)
    except (ProtocolError, ValueError, TypeError) as exc:
        raise AclError(str(exc)) from exc
    req.content = fields_text(ext, _NOT_SIGNED)
    req.body = body
    return req


# The header fields that name each code's resources, and the only ones _resources reads (a code
# not here names none; HEART_BEAT names them in its body). Two requests of one code, access key
# and remote host with the same values here get the same decision but for their signature.
_KEY_FIELDS: Final[dict[int, tuple[str, ...]]] = {
    RC.SEND_MESSAGE: ("topic", "group"),  # group: as Java reads it (V1 has no such field)
    RC.SEND_MESSAGE_V2: ("b", "a"),
    RC.SEND_BATCH_MESSAGE: ("b", "a"),  # ours (Java checks nothing for a batch)
    RC.CONSUMER_SEND_MSG_BACK: ("group",),
    RC.PULL_MESSAGE: ("topic", "consumerGroup"),
    RC.QUERY_MESSAGE: ("topic",),
    RC.UNREGISTER_CLIENT: ("consumerGroup",),
    RC.GET_CONSUMER_LIST_BY_GROUP: ("consumerGroup",),
    RC.UPDATE_CONSUMER_OFFSET: ("consumerGroup", "topic"),
}
_SENDS: Final = frozenset({RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE})
_GROUP_ONLY: Final = frozenset(
    {RC.CONSUMER_SEND_MSG_BACK, RC.UNREGISTER_CLIENT, RC.GET_CONSUMER_LIST_BY_GROUP}
)


def _resources(req: AccessRequest, code: int, ext: Mapping[str, str],
               body: bytes | memoryview | None) -> None:  # fmt: skip
    if code == RC.HEART_BEAT:
        hb = HeartbeatData.from_json(bytes(body or b""))
        for data in hb.consumer_data_set:
            req.need(_group_topic(data.group_name), SUB)
            for sub in data.subscription_data_set:
                req.need(sub.topic, SUB)
        return
    named = [ext.get(f) for f in _KEY_FIELDS.get(code, ())]
    if code in _SENDS:
        topic, group = named
        if is_retry_topic(topic):
            req.need(_group_topic(group), SUB)
        else:
            req.need(topic, PUB)
    elif code in _GROUP_ONLY:
        req.need(_group_topic(named[0]), SUB)
    elif code == RC.PULL_MESSAGE:
        req.need(named[0], SUB)
        req.need(_group_topic(named[1]), SUB)
    elif code == RC.QUERY_MESSAGE:
        req.need(named[0], SUB)
    elif code == RC.UPDATE_CONSUMER_OFFSET:
        req.need(_group_topic(named[0]), SUB)
        req.need(named[1], SUB)


RELOAD_CHECK_MS = 500  # AclFileWatchService looks at the files this often
DECISIONS_KEPT = 4096  # decisions a validator keeps (all forgotten when full)
DECISION_CHARS_KEPT = 1 << 16  # and at most this many characters of their keys' values

# (refusal before the signature, the account's signer, refusal after a good signature)
Decision = tuple[str | None, Signer | None, str | None]


class SignedNames:
    """The names a request's signature covers (all but Signature and the unique-key query
    flag), in signing order, kept per the fields' names in arrival order: one client's
    requests of one kind come with their fields in one order, so the sort is done once. At
    most CHARS_KEPT characters of names are kept (all forgotten when a new order would pass
    that): a peer cannot grow it with long or many names."""

    CHARS_KEPT: Final = 1 << 16
    __slots__ = ("chars", "kept")

    def __init__(self) -> None:
        self.kept: dict[tuple[str, ...], list[str]] = {}
        self.chars = 0

    def names(self, ext: Mapping[str, str]) -> list[str]:
        """ext's signed names, sorted."""
        order = tuple(ext)
        names = self.kept.get(order)
        if names is None:
            names = [k for k in sorted(ext) if k not in _NOT_SIGNED]
            size = sum(map(len, order))
            if self.chars + size > self.CHARS_KEPT:
                self.kept.clear()
                self.chars = 0
            self.kept[order] = names
            self.chars += size
        return names


class PlainAccessValidator:
    """The broker's RPC hook for one processor: parse then validate each client request,
    the ACL files looked at again every RELOAD_CHECK_MS (a changed file is reloaded)."""

    def __init__(self, home: str, acl_file: str = DEFAULT_ACL_FILE,
                 admin_codes: frozenset[int] = ADMIN_CODES,
                 checked_codes: frozenset[int] | None = None) -> None:  # fmt: skip
        self.manager = PlainPermissionManager(home, acl_file, admin_codes)
        self.checked_codes = checked_codes  # None: every code
        try:
            self.manager.load()
        except AclError as exc:  # checked at start: broken since; closed until mended
            log.error("ACL files do not load (%s): only white addresses are let in until they "
                      "are mended", exc)  # fmt: skip
            self.manager.loaded = ()  # the next look finds them changed and tries again
        self.next_check_ms = 0
        # per (code, access key, host, _KEY_FIELDS' values): what validate decides but for
        # the signature, for the manager's configuration of generation _generation
        self._decisions: dict[tuple[Any, ...], Decision] = {}
        self._kept_chars = 0  # characters of the kept keys' values
        self._generation = -1
        self._signed_names = SignedNames()

    def check(self, code: int, ext: Mapping[str, str] | None, body: bytes | memoryview | None,
              peer: tuple[str, int] | None, now_ms: int) -> str | None:  # fmt: skip
        """None when the request may go on, else the remark of its SYSTEM_ERROR answer."""
        if self.checked_codes is not None and code not in self.checked_codes:
            return None
        manager = self.manager
        if now_ms >= self.next_check_ms:
            self.next_check_ms = now_ms + RELOAD_CHECK_MS
            manager.reload_if_changed()
        if code == RC.HEART_BEAT or ext is None:  # a heartbeat's resources are in its body
            return self._validate(code, ext, body, peer)
        fields = _KEY_FIELDS.get(code, ())
        access_key = ext.get(ACCESS_KEY)
        named = [ext.get(f) for f in fields]
        key = (code, access_key, None if peer is None else peer[0], *named)
        if self._generation != manager.generation:
            self._generation = manager.generation
            self._decisions.clear()
            self._kept_chars = 0
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(code, ext, body, peer)
            size = sum(len(v) for v in (access_key, *named) if v is not None)
            kept = self._decisions
            if len(kept) >= DECISIONS_KEPT or self._kept_chars + size > DECISION_CHARS_KEPT:
                kept.clear()  # a peer's long topics or keys cannot grow it without bound
                self._kept_chars = 0
            kept[key] = decision
            self._kept_chars += size
        refused, signer, then = decision
        if signer is None:  # refused or let through before any signature is read
            return refused
        content = values_text(ext, self._signed_names.names(ext))
        if not signatures_equal(signer.signature(content, body), ext.get(SIGNATURE)):
            return AclError(signature_failed(access_key or "")).remark()
        return then

    @property
    def kept_decisions(self) -> int:
        """How many decisions are kept now."""
        return len(self._decisions)

    def _validate(self, code: int, ext: Mapping[str, str] | None,
                  body: bytes | memoryview | None, peer: tuple[str, int] | None
                  ) -> str | None:  # fmt: skip
        """The whole of parse and validate for one request."""
        addr = None if peer is None else f"{peer[0]}:{peer[1]}"
        try:
            self.manager.validate(parse(code, ext, body, addr))
        except AclError as exc:
            return exc.remark()
        return None

    def _decide(self, code: int, ext: Mapping[str, str], body: bytes | memoryview | None,
                peer: tuple[str, int] | None) -> Decision:  # fmt: skip
        """What validate concludes of requests like this one but for their signature:
        (remark, None, None) refused or (None, None, None) let through before the signature
        is read; (None, the account's signer, remark or None) once the signature is good."""
        manager = self.manager
        addr = None if peer is None else f"{peer[0]}:{peer[1]}"
        try:
            req = parse(code, ext, body, addr)
            acc = manager.admit(req.remote_addr, req.access_key)
        except AclError as exc:
            return exc.remark(), None, None
        if acc is None:
            return None, None, None
        try:
            manager.check_resources(req, acc)
        except AclError as exc:
            return None, signer_for(acc.secret_key), exc.remark()
        return None, signer_for(acc.secret_key), None


# ours: RocketMQ 4.9's name server checks nothing, so anyone who reaches it can rewrite routes
# and KV config. With ACL on, these codes need an admin account; reads (routes, cluster info,
# KV reads) and the brokers' own REGISTER_BROKER / UNREGISTER_BROKER stay open, as brokers
# do not sign them (4.9's BrokerOuterAPI has no RPC hook).
NAMESRV_WRITE_CODES: Final = frozenset({
    RC.DELETE_TOPIC_IN_NAMESRV, RC.PUT_KV_CONFIG, RC.DELETE_KV_CONFIG,
    RC.WIPE_WRITE_PERM_OF_BROKER, RC.ADD_WRITE_PERM_OF_BROKER, RC.UPDATE_NAMESRV_CONFIG,
})  # fmt: skip


def namesrv_access_validator(home: str, acl_file: str = DEFAULT_ACL_FILE) -> PlainAccessValidator:
    """The name server's check: its write codes need a signed admin account (or a white
    address); every other code is served unsigned."""
    return PlainAccessValidator(home, acl_file, admin_codes=NAMESRV_WRITE_CODES,
                                checked_codes=NAMESRV_WRITE_CODES)  # fmt: skip
