"""plain_acl.yml's pieces on their own: the YAML subset, white-list entries, the files and
their reload, the signature (test_acl_golden.py checks the whole against RocketMQ 4.9.8)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actors.acl.acl_yaml import YamlError, dumps, loads
from actors.acl.plain_access_validator import parse
from actors.acl.plain_permission_manager import (
    PUB,
    SUB,
    AccessRequest,
    PlainPermissionManager,
    java_hash_order,
)
from actors.acl.remote_address_strategy import AclError, remote_address_strategy
from protocol.acl import SIGNATURE, cal_signature, combine_request_content, fields_text, sign_ext
from protocol.codes import RequestCode as RC


def test_the_signature_is_hmac_sha1_over_the_sorted_values_then_the_body() -> None:
    ext = {"b": "2", "a": "1", SIGNATURE: "ignored"}
    assert combine_request_content(ext, b"xyz") == b"12xyz"
    # HMAC-SHA1("12345678", "12xyz"), Base64, as `openssl dgst -sha1 -hmac 12345678` gives it
    assert cal_signature(b"12xyz", "12345678") == "N8n2jxGfmPTHRmXt2sghkenb7K8="  # openssl dgst
    signed = {"topic": "T"}
    sign_ext(signed, b"", "RocketMQ", "12345678")
    assert set(signed) == {"topic", "AccessKey", SIGNATURE}
    assert signed[SIGNATURE] == cal_signature(b"RocketMQT", "12345678")


@pytest.mark.parametrize(("entry", "admitted", "refused"), [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["127.0.0.1"]),
    ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3", "192.168.1.1"]),
    ("10.0.0.1,10.0.0.9", ["10.0.0.9"], ["10.0.0.2"]),
    ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1"]),
    ("192.168.*", ["192.168.77.3"], ["192.169.0.1"]),
    ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.9", "192.168.1.21"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
    ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
])  # fmt: skip
def test_white_list_entries(entry: str, admitted: list[str], refused: list[str]) -> None:
    strategy = remote_address_strategy(entry)
    assert all(strategy.match(a) for a in admitted)
    assert not any(strategy.match(a) for a in refused)


@pytest.mark.parametrize("entry", ["192.168.1.300-400", "not-an-ip", "1.2.3", "192.168.1.-5"])
def test_a_bad_white_list_entry_is_an_acl_error(entry: str) -> None:
    with pytest.raises(AclError):
        remote_address_strategy(entry)


def test_yaml_shapes_round_trip_and_bad_ones_are_refused() -> None:
    data = loads("a:\n  - x\n  - 'y: z'\nb: [p, q]\nc:\nd:\n- k: 1\n  l: \"two\"  # note\n")
    assert data == {"a": ["x", "y: z"], "b": ["p", "q"], "c": None,
                    "d": [{"k": "1", "l": "two"}]}  # fmt: skip
    assert loads(dumps(data)) == data
    for bad in ("a: &anchor 1\n", "a:\n  - x\n   - y\n", "\ta: 1\n", "- just\n- a list\n"):
        with pytest.raises(YamlError):
            loads(bad)


def _home(tmp_path: Path, text: str) -> PlainPermissionManager:
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "plain_acl.yml").write_text(text)
    mgr = PlainPermissionManager(str(tmp_path))
    mgr.load()
    return mgr


ONE = "accounts:\n  - accessKey: alice123\n    secretKey: secret123\n    defaultTopicPerm: SUB\n"


def _send(topic: str, ak: str, sk: str) -> AccessRequest:
    ext = {"a": "g", "b": topic}
    sign_ext(ext, b"body", ak, sk)
    return parse(RC.SEND_MESSAGE_V2, ext, b"body", "127.0.0.1:5555")


def test_an_edit_of_the_file_takes_effect_at_the_next_reload(tmp_path: Path) -> None:
    mgr = _home(tmp_path, ONE)
    with pytest.raises(AclError, match="No default permission for topic:T"):
        mgr.validate(_send("T", "alice123", "secret123"))
    assert not mgr.reload_if_changed()
    path = tmp_path / "conf" / "plain_acl.yml"
    path.write_text(ONE.replace("defaultTopicPerm: SUB", "defaultTopicPerm: PUB|SUB"))
    os.utime(path, ns=(1, 1))  # a stamp surely different from the first write's
    assert mgr.reload_if_changed()
    mgr.validate(_send("T", "alice123", "secret123"))


def test_a_broken_edit_keeps_the_last_good_accounts(tmp_path: Path) -> None:
    mgr = _home(tmp_path, ONE)
    path = tmp_path / "conf" / "plain_acl.yml"
    path.write_text("accounts:\n  - accessKey: short\n    secretKey: x\n")
    os.utime(path, ns=(2, 2))
    assert not mgr.reload_if_changed()
    assert "alice123" in mgr.accounts


def test_files_under_conf_acl_count_and_a_key_counts_where_first_read(tmp_path: Path) -> None:
    (tmp_path / "conf" / "acl" / "team").mkdir(parents=True)
    (tmp_path / "conf" / "acl" / "team" / "b.yaml").write_text(
        "globalWhiteRemoteAddresses: ['10.1.1.*']\naccounts:\n  - accessKey: bobby123\n"
        "    secretKey: bobsecret\n    admin: true\n")
    (tmp_path / "conf" / "acl" / "x.txt").write_text("accounts: nonsense")
    mgr = _home(tmp_path, ONE + "  - accessKey: bobby123\n    secretKey: other999\n")
    assert mgr.accounts["bobby123"].secret_key == "bobsecret" and mgr.accounts["bobby123"].admin
    req = parse(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, None, "10.1.1.9:1234")
    mgr.validate(req)  # a global white address of the second file


def test_resources_are_checked_in_java_hash_map_order() -> None:
    # java.util.HashMap of these two keys iterates "topicD" before "%RETRY%groupB"
    assert java_hash_order(["%RETRY%groupB", "topicD"]) == ["topicD", "%RETRY%groupB"]
    req = parse(RC.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}, None, "1.2.3.4:5")
    assert req.perms == {"T": SUB, "%RETRY%G": SUB} and req.remote_addr == "1.2.3.4"
    req = parse(RC.SEND_MESSAGE_V2, {"a": "G", "b": "%RETRY%G"}, None, None)
    assert req.perms == {"%RETRY%G": SUB} and PUB not in req.perms.values()
    with pytest.raises(AclError):
        parse(RC.HEART_BEAT, {}, b"{not json", "1.2.3.4:5")


def test_the_signed_text_follows_the_names_whatever_order_the_fields_came_in() -> None:
    import random

    rnd = random.Random(7)
    names = ["b", "a", "AccessKey", "Signature", "_UNIQUE_KEY_QUERY", "zz", "Z"]
    for _ in range(50):
        rnd.shuffle(names)
        ext = {k: f"<{k}>" for k in names}
        for skip in (frozenset((SIGNATURE,)), frozenset((SIGNATURE, "_UNIQUE_KEY_QUERY"))):
            want = "".join(ext[k] for k in sorted(ext) if k not in skip).encode()
            assert fields_text(ext, skip) == want
    assert fields_text({"b": "2", "a": "1"}) == b"12" == fields_text({"a": "1", "b": "2"})


def test_what_the_signature_check_keeps_is_bounded_and_surrogates_read_as_java_does(
    tmp_path: Path,
) -> None:
    from actors.acl.plain_access_validator import (
        DECISION_CHARS_KEPT,
        PlainAccessValidator,
        SignedNames,
    )

    assert fields_text({"a": "x\ud800y"}) == b"x?y"  # String.getBytes(UTF_8): "?" for it
    names = SignedNames()
    for i in range(200):  # a peer sending ever new, long field names
        ext = {f"{i}-{'n' * 2000}-{j}": "v" for j in range(3)}
        assert names.names({**ext, "Signature": "s"}) == sorted(ext)
        assert names.chars <= SignedNames.CHARS_KEPT
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(ONE)
    validator = PlainAccessValidator(str(tmp_path))
    peer = ("127.0.0.1", 1)
    for i in range(100):  # unsigned sends to ever new, long topics
        ext = {"a": "g", "b": f"T{i}-{'t' * 5000}"}
        assert "No accessKey" in (validator.check(RC.SEND_MESSAGE_V2, ext, b"", peer, 0) or "")
        assert validator.kept_decisions <= DECISION_CHARS_KEPT // 5000 + 1
