"""The console's producers: a producer group's connections on each master of a topic.

Mirrors apache/rocketmq-dashboard's ProducerServiceImpl (mqadmin producerConnection).
"""

from __future__ import annotations

from dataclasses import dataclass

from deploy.admin_ext import call, json_object, route_masters, topic_route
from protocol.codes import RequestCode as RC


@dataclass(frozen=True)
class ProducerRow:
    broker: str
    client_id: str
    client_addr: str
    language: str
    version: int


def producer_rows(namesrv: str, topic: str, group: str) -> list[ProducerRow]:
    rows = []
    for broker, addr in sorted(route_masters(topic_route(namesrv, topic)).items()):
        resp = call(addr, RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}, ok=(0, 1))
        if resp.code != 0:
            continue
        for c in json_object(resp).get("connectionSet", []):
            rows.append(ProducerRow(broker, str(c.get("clientId", "")),
                                    str(c.get("clientAddr", "")), str(c.get("language", "")),
                                    int(c.get("version", 0))))  # fmt: skip
    return sorted(rows, key=lambda r: (r.broker, r.client_id))
