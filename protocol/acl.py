"""The signature of an ACL-signed request: what a client adds and a broker checks.

Mirrors acl/common/AclClientRPCHook.java, AclUtils.combineRequestContent and AclSigner,
RocketMQ 4.9.x. A signing client puts its AccessKey (and a SecurityToken when it has one) into
the request's extFields, then signs: the values of every ext field but Signature, in the order
of their names (Java's TreeMap: UTF-16 order, the same as Python's for these names), joined
into one UTF-8 string, followed by the body; HMAC-SHA1 with the secret key, Base64. The
Signature field carries the result. The broker rebuilds the same bytes from what arrived
(leaving out Signature and the query-by-unique-key flag) and compares.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from protocol.command import RemotingCommand

ACCESS_KEY: Final = "AccessKey"  # SessionCredentials.ACCESS_KEY
SECRET_KEY: Final = "SecretKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG


def combine_request_content(ext: Mapping[str, str], body: bytes | memoryview | None,
                            skip: frozenset[str] = frozenset((SIGNATURE,))) -> bytes:
    """combineRequestContent: the values of ext's fields by name (those in `skip` left out),
    then the body."""
    data = fields_text(ext, skip)
    return data + bytes(body) if body else data


def fields_text(ext: Mapping[str, str], skip: frozenset[str] = frozenset((SIGNATURE,))) -> bytes:
    """The first part of combineRequestContent: the fields' values by name, as UTF-8 (an
    unpaired surrogate, which a JSON header can carry, as "?": Java's String.getBytes)."""
    return values_text(ext, [k for k in sorted(ext) if k not in skip])


def values_text(ext: Mapping[str, str], names: list[str]) -> bytes:
    """The values of ext's `names`, in that order, as fields_text encodes them."""
    return "".join(map(ext.__getitem__, names)).encode("utf-8", "replace")


_SHA1_BLOCK: Final = 64


class Signer:
    """AclSigner for one secret key: HMAC-SHA1 (RFC 2104) with its two keyed SHA-1 states
    made once (a broker keeps one per account) and copied for each request, the hash
    objects' own copies rather than hmac.HMAC's wrapper (a third less per request)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, secret_key: str) -> None:
        key = secret_key.encode("utf-8")
        if len(key) > _SHA1_BLOCK:
            key = hashlib.sha1(key).digest()
        key = key.ljust(_SHA1_BLOCK, b"\0")
        self._inner = hashlib.sha1(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha1(bytes(b ^ 0x5C for b in key))

    def signature(self, data: bytes, body: bytes | memoryview | None = None) -> bytes:
        """Base64 of HMAC-SHA1(secret, data + body), as ASCII bytes (the body fed to the MAC
        as it is, not joined to data first)."""
        inner = self._inner.copy()
        inner.update(data)
        if body:
            inner.update(body)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return binascii.b2a_base64(outer.digest(), newline=False)


@functools.lru_cache(maxsize=256)
def signer_for(secret_key: str) -> Signer:
    """The Signer of a secret key (kept: a client signs every request with the same one, a
    broker checks each account's again and again)."""
    return Signer(secret_key)


def cal_signature(data: bytes, secret_key: str, body: bytes | memoryview | None = None) -> str:
    """AclSigner.calSignature: Base64 of HMAC-SHA1(secret_key, data + body)."""
    return signer_for(secret_key).signature(data, body).decode("ascii")


def sign_ext(ext: dict[str, str], body: bytes | memoryview | None, access_key: str,
             secret_key: str, security_token: str | None = None) -> None:
    """AclClientRPCHook.doBeforeRequest on a request's ext fields (changed in place: they are
    the request's own, about to be encoded): AccessKey, SecurityToken, then Signature."""
    ext[ACCESS_KEY] = access_key
    if security_token is not None:
        ext[SECURITY_TOKEN] = security_token
    ext.pop(SIGNATURE, None)
    ext[SIGNATURE] = cal_signature(fields_text(ext), secret_key, body)


def signatures_equal(a: str | bytes, b: str | None) -> bool:
    """Compare a computed signature with the one received, in constant time."""
    if b is None:
        return False
    mine = a.encode("ascii") if isinstance(a, str) else a
    return hmac.compare_digest(mine, b.encode("utf-8", "replace"))


@dataclass(frozen=True)
class SessionCredentials:
    """acl/common/SessionCredentials: what a client signs with (the secret in no repr)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, access_key: str | None, secret_key: str | None,
           security_token: str | None = None) -> SessionCredentials | None:  # fmt: skip
        """The credentials of a client given these keys (None: it does not sign)."""
        return None if access_key is None else cls(access_key, secret_key or "", security_token)

    def sign(self, cmd: RemotingCommand) -> RemotingCommand:
        """AclClientRPCHook.doBeforeRequest on a request about to be encoded."""
        ext = dict(cmd.ext_fields or {})
        sign_ext(ext, cmd.body, self.access_key, self.secret_key, self.security_token)
        cmd.ext_fields = ext
        return cmd
