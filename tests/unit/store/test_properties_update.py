"""store.config.update_properties_text: UPDATE_BROKER_CONFIG's changes written into a broker.conf
in place (what the next start reads), the rest of the file as its author wrote it."""

from __future__ import annotations

from store.config import parse_properties_text, update_properties_text

CONF = """# broker-a, edited by hand
brokerName=broker-a
listenPort = 10911

# a value that goes on over two lines, mentioning a key on the second
msgTraceTopicName=T1 \\
  listenPort=5
flushDiskType: ASYNC_FLUSH \\
   still-the-value
listenPort=10912"""


def test_updated_keys_are_replaced_in_place_and_the_rest_kept() -> None:
    text = update_properties_text(CONF, {"listenPort": "20911", "flushDiskType": "SYNC_FLUSH",
                                         "brokerPermission": "4"})  # fmt: skip
    assert text.splitlines() == [
        "# broker-a, edited by hand",
        "brokerName=broker-a",
        "listenPort=20911",
        "",
        "# a value that goes on over two lines, mentioning a key on the second",
        "msgTraceTopicName=T1 \\",
        "  listenPort=5",
        "flushDiskType=SYNC_FLUSH",
        "brokerPermission=4",
    ]
    assert parse_properties_text(text) == {
        "brokerName": "broker-a", "listenPort": "20911", "msgTraceTopicName": "T1 listenPort=5",
        "flushDiskType": "SYNC_FLUSH", "brokerPermission": "4",
    }  # fmt: skip


def test_an_empty_or_missing_file_gets_the_keys() -> None:
    assert update_properties_text("", {"a": "1"}) == "a=1\n"
    assert update_properties_text("b=2", {"a": "1"}) == "b=2\na=1\n"
