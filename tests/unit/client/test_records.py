"""MessageExt.user_properties: a received message sent on passes the producer's checks."""

from __future__ import annotations

from actors.client.records import Message, MessageExt
from actors.client.validators import check_message
from protocol import message as wire


def test_user_properties_leave_out_the_system_names() -> None:
    props = {"TAGS": "t", "KEYS": "k1 k2", "UNIQ_KEY": "AB", "MIN_OFFSET": "0", "TRAN_MSG": "true",
             "REAL_TOPIC": "X", "color": "red", "size": "9"}
    got = MessageExt(topic="T", body=b"b", tags="t", keys="k1 k2", properties=props)
    assert got.user_properties == {"color": "red", "size": "9"}
    assert not set(got.user_properties) & wire.STRING_HASH_SET
    again = Message("T2", got.body, tags=got.tags, keys=got.keys,
                    properties=got.user_properties)
    check_message(again, 4 * 1024 * 1024)  # raises MessageValidationError when refused
    assert again.wire_properties() == {"TAGS": "t", "KEYS": "k1 k2", "color": "red", "size": "9"}
