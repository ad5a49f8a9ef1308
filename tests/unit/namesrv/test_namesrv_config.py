"""GET_NAMESRV_CONFIG (319) / UPDATE_NAMESRV_CONFIG (318) and the unit-topic lists (311-313),
as DefaultRequestProcessor 4.9.x answers them; the KV config persisted in kvConfigPath."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from namesrv_kit import register_body, wire_req
from test_namesrv_processor import REG_EXT

from actors.namesrv.config import NamesrvConfig
from actors.namesrv.processor import NamesrvProcessor
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from store.config import parse_properties_text


def _proc(tmp_path: Path, **props: str) -> NamesrvProcessor:
    return NamesrvProcessor(config=NamesrvConfig.from_properties(props, str(tmp_path)))


def _config(p: NamesrvProcessor) -> dict[str, str]:
    r = p.process(wire_req(RC.GET_NAMESRV_CONFIG), 0)
    assert r is not None and r.code == RS.SUCCESS
    return parse_properties_text(bytes(r.body).decode())


def test_get_config_lists_every_name(tmp_path: Path) -> None:
    got = _config(_proc(tmp_path, orderMessageEnable="true"))
    assert got["orderMessageEnable"] == "true" and got["listenPort"] == "9876"
    assert got["kvConfigPath"] == str(tmp_path / "namesrv" / "kvConfig.json")
    assert got["configStorePath"] == str(tmp_path / "namesrv" / "namesrv.properties")
    assert got["productEnvName"] == "center"


def test_update_config_applies_persists_and_refuses_the_black_list(tmp_path: Path) -> None:
    p = _proc(tmp_path)
    body = b"orderMessageEnable=true\nbrokerChannelExpiredTime=5000\nnoSuchName=1\n"
    r = p.process(wire_req(RC.UPDATE_NAMESRV_CONFIG, None, body), 0)
    assert r is not None and r.code == RS.SUCCESS
    assert p.order_message_enable and p.routes.broker_expired_ms == 5000
    stored = parse_properties_text((tmp_path / "namesrv" / "namesrv.properties").read_text())
    assert stored["orderMessageEnable"] == "true" and "noSuchName" not in stored

    for name in ("kvConfigPath", "configStorePath", "configBlackList"):
        r = p.process(wire_req(RC.UPDATE_NAMESRV_CONFIG, None, f"{name}=/etc/x\n".encode()), 0)
        assert r is not None and r.code == RS.NO_PERMISSION
        assert r.remark == "Can not update config in black list."
    assert _config(p)["kvConfigPath"] == str(tmp_path / "namesrv" / "kvConfig.json")

    r = p.process(wire_req(RC.UPDATE_NAMESRV_CONFIG, None, b"clusterTest=maybe\n"), 0)
    assert r is not None and r.code == RS.SYSTEM_ERROR and "clusterTest" in (r.remark or "")
    assert _config(p)["clusterTest"] == "false"
    r = p.process(wire_req(RC.UPDATE_NAMESRV_CONFIG, None, b""), 0)  # Java: nothing to do
    assert r is not None and r.code == RS.SUCCESS and _config(p)["clusterTest"] == "false"


def test_order_message_enable_update_reaches_routes(tmp_path: Path) -> None:
    p = _proc(tmp_path)
    body = register_body({"OrderT": {}})
    ext = dict(REG_EXT, bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
    assert p.process(wire_req(RC.REGISTER_BROKER, ext, body), 0).code == RS.SUCCESS
    put = {"namespace": "ORDER_TOPIC_CONFIG", "key": "OrderT", "value": "broker-a:4"}
    assert p.process(wire_req(RC.PUT_KV_CONFIG, put), 0).code == RS.SUCCESS

    def order_conf() -> object:
        r = p.process(wire_req(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OrderT"}), 0)
        return json.loads(bytes(r.body)).get("orderTopicConf")

    assert order_conf() is None
    p.process(wire_req(RC.UPDATE_NAMESRV_CONFIG, None, b"orderMessageEnable=true"), 0)
    assert order_conf() == "broker-a:4"
    # the KV config outlives the name server (kvConfigPath)
    again = _proc(tmp_path, orderMessageEnable="true")
    assert again.kv.get("ORDER_TOPIC_CONFIG", "OrderT") == "broker-a:4"


@pytest.mark.parametrize(
    ("code", "want"),
    [(RC.GET_UNIT_TOPIC_LIST, ["Unit", "UnitAndSub"]),
     (RC.GET_HAS_UNIT_SUB_TOPIC_LIST, ["Sub", "UnitAndSub"]),
     (RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, ["Sub"])],
)  # fmt: skip
def test_unit_topic_lists(tmp_path: Path, code: int, want: list[str]) -> None:
    p = _proc(tmp_path)
    body = register_body({"Plain": {}, "Unit": {"sys": 1}, "Sub": {"sys": 2},
                          "UnitAndSub": {"sys": 3}})  # fmt: skip
    ext = dict(REG_EXT, bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
    assert p.process(wire_req(RC.REGISTER_BROKER, ext, body), 0).code == RS.SUCCESS
    r = p.process(wire_req(code), 0)
    assert r is not None and r.code == RS.SUCCESS
    assert json.loads(bytes(r.body)) == {"topicList": want}


def test_rocketmq_acl_plain_file_is_read_at_start_only() -> None:
    from actors.broker.config import BrokerConfig
    from store.config import properties_text

    props = {"aclEnable": "true", "rocketmqHome": "/h", "rocketmq.acl.plain.file": "conf/a.yml"}
    assert BrokerConfig.from_properties(props).aclPlainFile == "conf/a.yml"
    assert BrokerConfig.from_properties({}).aclPlainFile == "conf/plain_acl.yml"
    assert BrokerConfig.from_properties({"aclPlainFile": "x"}).aclPlainFile == "conf/plain_acl.yml"
    cfg = NamesrvConfig.from_properties(props)
    assert cfg.aclPlainFile == "conf/a.yml"
    # the broker: UPDATE_BROKER_CONFIG knows the name, keeps it for the next start
    from actors.broker.config import apply_config_updates, split_config_updates
    from store.config import StoreConfig

    bc, sc = BrokerConfig.from_properties(props), StoreConfig()
    assert split_config_updates({"rocketmq.acl.plain.file": "b"}, StoreConfig) == (
        {"aclPlainFile": "b"}, {}, [])
    assert not apply_config_updates(bc, sc, (("rocketmq.acl.plain.file", "conf/b.yml"),))
    assert bc.aclPlainFile == "conf/a.yml"
    assert "rocketmq.acl.plain.file=conf/a.yml\n" in properties_text(bc, sc)
    # one name everywhere: read, listed (GET_*_CONFIG, persisted files), refused when changed
    assert "rocketmq.acl.plain.file=conf/a.yml\n" in properties_text(cfg)
    assert "aclPlainFile" not in properties_text(cfg)
    assert cfg.update({"rocketmq.acl.plain.file": "conf/a.yml", "x.y": "1"}) == ["x.y"]
    with pytest.raises(ValueError, match=r"rocketmq\.acl\.plain\.file is read at start only"):
        cfg.update({"rocketmq.acl.plain.file": "conf/b.yml"})
    assert cfg.aclPlainFile == "conf/a.yml"
