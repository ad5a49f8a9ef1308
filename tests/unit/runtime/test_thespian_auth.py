"""AuthenticatedPickle: Thespian packets are unpickled only under this process tree's key."""

from __future__ import annotations

import pickle
import secrets

import pytest

from actors.runtime import thespian_auth
from actors.runtime.thespian_auth import ACK, ACK_DATA_ERROR, AuthenticatedPickle


class _Boom:
    """Unpickling it raises: proof that a refused packet was never unpickled."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (_explode, ("unpickled",))


def _explode(why: str) -> None:
    raise AssertionError(why)


def _ser() -> AuthenticatedPickle:
    return AuthenticatedPickle(secrets.token_bytes(thespian_auth.KEY_BYTES))


def test_round_trip_under_one_key() -> None:
    ser = _ser()
    msg = ("addr", {"a": [1, 2, b"x" * 5000]})
    assert ser.loads(ser.dumps(msg)) == msg
    assert ser.refused == 0


def test_bare_pickle_and_foreign_key_are_refused_unread() -> None:
    ser, other = _ser(), _ser()
    assert ser.loads(pickle.dumps(_Boom())) == ACK_DATA_ERROR
    assert ser.loads(other.dumps(_Boom())) == ACK_DATA_ERROR
    assert ser.loads(b"") == ACK_DATA_ERROR
    assert ser.loads(b"\x00" * thespian_auth.TAG_BYTES) == ACK_DATA_ERROR
    assert ser.refused == 4


def test_tampered_packet_is_refused() -> None:
    ser = _ser()
    packet = bytearray(ser.dumps(("addr", "hello")))
    packet[-3] ^= 0x01
    assert ser.loads(bytes(packet)) == ACK_DATA_ERROR
    packet = bytearray(ser.dumps(("addr", "hello")))
    packet[0] ^= 0x80
    assert ser.loads(bytes(packet)) == ACK_DATA_ERROR


def test_thespian_acknowledgements_pass_by_their_bytes() -> None:
    from thespian.system.transport.streamBuffer import ackDataErrMsg, ackMsg

    ser = _ser()
    for sent, want in ((ackMsg, ACK), (ackDataErrMsg, ACK_DATA_ERROR)):
        _size, _, body = sent.partition(b">")
        assert ser.loads(body) == want
    assert ser.refused == 0


def test_short_keys_are_refused() -> None:
    with pytest.raises(ValueError):
        AuthenticatedPickle(b"short")


def test_install_puts_it_in_thespians_transport() -> None:
    import importlib

    ser = thespian_auth.install()
    transport = importlib.import_module("thespian.system.transport.TCPTransport")
    assert transport.serializer is ser
    assert thespian_auth.install() is ser  # one key for the process tree
