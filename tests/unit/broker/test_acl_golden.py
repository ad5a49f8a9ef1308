"""The broker's ACL check against the real RocketMQ 4.9.8 classes (rmq-acl.jar).

tests/clients/AclGolden.java signs each generated request with AclClientRPCHook (when the case
signs) and runs PlainAccessValidator.validate(parse(...)) over the same plain_acl.yml; ours
must put the same Signature in and reach the same verdict with the same message, for good
keys, wrong secrets, unknown and missing keys, tampered bodies, white addresses (global and
per account, ranges and lists), admin codes, DENY / PUB / SUB / defaults, retry groups, the
trace topic, heartbeats and headers missing a field.
"""

from __future__ import annotations

import base64
import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from actors.acl.plain_access_validator import PlainAccessValidator, parse
from actors.acl.plain_permission_manager import PlainPermissionManager
from actors.acl.remote_address_strategy import AclError
from protocol.acl import SIGNATURE, UNIQUE_MSG_QUERY_FLAG, sign_ext
from protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from protocol.codes import RequestCode as RC

JAVA_SRC = Path(__file__).resolve().parents[2] / "clients" / "AclGolden.java"

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.{1,2}

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - topicD=PUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 87654321abc
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true

  - accessKey: subscriber
    secretKey: sub-secret-1
    whiteRemoteAddress: 172.16.5.10-20
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB

  - accessKey: adminWithPerms
    secretKey: admin-secret-1
    admin: true
    defaultTopicPerm: PUB
    defaultGroupPerm: DENY
    topicPerms:
      - topicA=SUB
"""

KEYS = {"RocketMQ": "12345678", "rocketmq2": "87654321abc", "subscriber": "sub-secret-1",
        "adminWithPerms": "admin-secret-1"}
ADDRS = ["127.0.0.1:40001", "10.10.103.7:5000", "192.168.0.1:6000", "192.168.0.3:6000",
         "192.168.1.44:7000", "192.168.2.44:7000", "172.16.5.15:8000", "172.16.5.21:8000"]
TOPICS = ["topicA", "topicB", "topicC", "topicD", "topicE", "%RETRY%groupB",
          "RMQ_SYS_TRACE_TOPIC"]
GROUPS = ["groupA", "groupB", "groupC", "groupD"]


def _case(rnd: random.Random) -> dict[str, Any]:
    code = rnd.choice([RC.SEND_MESSAGE_V2, RC.SEND_MESSAGE, RC.PULL_MESSAGE, RC.HEART_BEAT,
                       RC.UPDATE_CONSUMER_OFFSET, RC.GET_CONSUMER_LIST_BY_GROUP,
                       RC.CONSUMER_SEND_MSG_BACK, RC.QUERY_MESSAGE, RC.UNREGISTER_CLIENT,
                       RC.UPDATE_AND_CREATE_TOPIC, RC.DELETE_SUBSCRIPTIONGROUP,
                       RC.GET_ROUTEINFO_BY_TOPIC])
    topic, group = rnd.choice(TOPICS), rnd.choice(GROUPS)
    body = b""
    ext: dict[str, str]
    if code == RC.SEND_MESSAGE_V2:
        ext = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": "1", "f": "0",
               "g": "1700000000000", "h": "0", "i": "TAGS\x01t\x02WAIT\x01true", "j": "0",
               "k": "false", "m": "false"}
        body = rnd.randbytes(rnd.randint(1, 40))
    elif code == RC.SEND_MESSAGE:
        ext = {"producerGroup": group, "topic": topic, "defaultTopic": "TBW102",
               "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
               "bornTimestamp": "1", "flag": "0"}
        if rnd.random() < 0.5:
            ext["group"] = group  # what Java reads for a %RETRY% send (V1 has no such field)
        body = rnd.randbytes(rnd.randint(1, 40))
    elif code == RC.PULL_MESSAGE:
        ext = {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "5",
               "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
               "suspendTimeoutMillis": "15000", "subVersion": "0"}
    elif code == RC.HEART_BEAT:
        subs = [SubscriptionData.build(t, "*") for t in rnd.sample(TOPICS, rnd.randint(0, 2))]
        hb = HeartbeatData("cid@1", [], [ConsumerData(g, subscription_data_set=subs)
                                         for g in rnd.sample(GROUPS, rnd.randint(0, 2))])
        ext, body = {}, hb.to_json()
    elif code == RC.UPDATE_CONSUMER_OFFSET:
        ext = {"consumerGroup": group, "topic": topic, "queueId": "1", "commitOffset": "9"}
        if rnd.random() < 0.2:
            del ext[rnd.choice(list(ext))]
        elif rnd.random() < 0.1:
            ext["queueId"] = "q1"
    elif code == RC.GET_CONSUMER_LIST_BY_GROUP:
        ext = {"consumerGroup": group} if rnd.random() < 0.8 else {"x": "1"}
    elif code == RC.CONSUMER_SEND_MSG_BACK:
        ext = {"group": group, "offset": "100", "delayLevel": "0", "originMsgId": "X"}
    elif code == RC.QUERY_MESSAGE:
        ext = {"topic": topic, "key": "k", "maxNum": "32", "beginTimestamp": "0",
               "endTimestamp": "1"}
        if rnd.random() < 0.3:
            ext[UNIQUE_MSG_QUERY_FLAG] = "true"
    elif code == RC.UNREGISTER_CLIENT:
        ext = {"clientID": "cid@1", "consumerGroup": group} if rnd.random() < 0.8 else \
            {"consumerGroup": group}  # fmt: skip
    else:
        ext = {"topic": topic}
    sign = None
    who = rnd.random()
    if who < 0.6:
        ak = rnd.choice(list(KEYS))
        sk = KEYS[ak] if rnd.random() < 0.85 else KEYS[ak] + "x"
        sign = {"ak": ak, "sk": sk}
        if rnd.random() < 0.1:
            sign["token"] = "tok"
    elif who < 0.7:
        sign = {"ak": "nobody00", "sk": "whatever1"}
    elif who < 0.8:
        ext["AccessKey"] = rnd.choice(list(KEYS))  # a key without a signature
    tamper = code in (RC.SEND_MESSAGE_V2, RC.SEND_MESSAGE) and sign is not None and \
        rnd.random() < 0.15  # fmt: skip
    return {"code": int(code), "ext": ext, "body": base64.b64encode(body).decode(),
            "addr": rnd.choice(ADDRS), "sign": sign, "tamper": tamper}


def _ours(mgr: PlainPermissionManager, case: dict[str, Any]) -> tuple[str, str]:
    ext = dict(case["ext"])
    body = bytearray(base64.b64decode(case["body"]))
    sig = "-"
    if case["sign"] is not None:
        s = case["sign"]
        sign_ext(ext, bytes(body), s["ak"], s["sk"], s.get("token"))
        sig = ext[SIGNATURE]
    if case["tamper"] and body:
        body[0] ^= 1
    try:
        mgr.validate(parse(case["code"], ext, bytes(body) or None, case["addr"]))
    except AclError as exc:
        return sig, f"ERR {exc}"
    return sig, "OK"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("aclhome")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return home


def test_the_check_matches_rocketmq_4_9_8(home: Path, tmp_path: Path) -> None:
    from deploy.reference import client_classpath

    cp = client_classpath()
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(tmp_path), str(JAVA_SRC)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    rnd = random.Random(20261129)
    cases = [_case(rnd) for _ in range(3000)]
    res = subprocess.run(["java", f"-Drocketmq.home.dir={home}", "-cp", f"{cp}:{tmp_path}",
                          "AclGolden"],
                         input="\n".join(json.dumps(c) for c in cases).encode(),
                         capture_output=True, timeout=120, check=True)  # fmt: skip
    java = [tuple(line.split("\t", 1)) for line in res.stdout.decode().splitlines()]
    assert len(java) == len(cases), res.stderr.decode()[-2000:]
    mgr = PlainPermissionManager(str(home))
    mgr.load()
    verdicts = {"OK": 0, "ERR": 0}
    for case, want in zip(cases, java, strict=True):
        got = _ours(mgr, case)
        assert got == want, (case, got, want)
        verdicts[got[1].split(" ", 1)[0]] += 1
    assert verdicts["OK"] > 60 and verdicts["ERR"] > 60, verdicts  # both sides exercised


def test_the_validator_decides_as_validate_with_its_decisions_kept(home: Path) -> None:
    """PlainAccessValidator.check keeps what validate decides of a request but its signature
    (per code, access key, host and the fields naming resources): over the same generated
    cases, each asked twice in a shuffled order, it answers exactly what validate(parse(...))
    answers; an edit of the file reaches kept decisions."""
    rnd = random.Random(20261130)
    cases = [_case(rnd) for _ in range(3000)]
    mgr = PlainPermissionManager(str(home))
    mgr.load()
    validator = PlainAccessValidator(str(home))
    asked = [*cases, *cases]
    rnd.shuffle(asked)
    verdicts = {"OK": 0, "ERR": 0}
    for case in asked:
        ext, body = _signed(case)
        host, port = case["addr"].rsplit(":", 1)
        got = validator.check(case["code"], ext, body, (host, int(port)), 0)
        try:
            mgr.validate(parse(case["code"], ext, body, case["addr"]))
            want = None
        except AclError as exc:
            want = exc.remark()
        assert got == want, (case, got, want)
        verdicts["OK" if got is None else "ERR"] += 1
    assert verdicts["OK"] > 300 and verdicts["ERR"] > 300, verdicts
    assert validator.kept_decisions < len(cases)  # decisions were shared, not one per case

    send = {"a": "groupB", "b": "topicC", "c": "TBW102"}
    sign_ext(send, b"x", "RocketMQ", "12345678")
    peer = ("127.0.0.1", 1)
    assert "No default permission for topic:topicC" in (
        validator.check(RC.SEND_MESSAGE_V2, send, b"x", peer, 0) or "")
    edited = home / "conf" / "acl" / "edit.yml"  # a second file: the module's home is shared
    edited.parent.mkdir(exist_ok=True)
    edited.write_text("globalWhiteRemoteAddresses:\n  - 127.0.0.1\n")
    try:
        assert validator.check(RC.SEND_MESSAGE_V2, send, b"x", peer, 10_000) is None
        assert validator.check(RC.SEND_MESSAGE_V2, {**send, "b": "topicA"}, b"x", peer,
                               10_000) is None  # fmt: skip
    finally:
        edited.unlink()
    assert validator.check(RC.SEND_MESSAGE_V2, send, b"x", peer, 20_000) is not None


def _signed(case: dict[str, Any]) -> tuple[dict[str, str], bytes | None]:
    """A generated case's ext fields and body as they arrive (signed, maybe tampered)."""
    ext = dict(case["ext"])
    body = bytearray(base64.b64decode(case["body"]))
    if case["sign"] is not None:
        s = case["sign"]
        sign_ext(ext, bytes(body), s["ak"], s["sk"], s.get("token"))
    if case["tamper"] and body:
        body[0] ^= 1
    return ext, bytes(body) or None
