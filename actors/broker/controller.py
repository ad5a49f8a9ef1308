"""The BrokerController core: authoritative topic/group/offset tables, their config files,
event fan-out to processor actors, and name-server registration commands.

Mirrors broker/BrokerController.java (registerBrokerAll, persist timers),
broker/topic/TopicConfigManager.java (topics.json, DataVersion),
broker/subscription/SubscriptionGroupManager.java and broker/offset/ConsumerOffsetManager.java
(persistence), broker/out/BrokerOuterAPI.java (REGISTER_BROKER / UNREGISTER_BROKER), RocketMQ
4.9.x. Pure: the actor adapter sends what this returns and calls tick().

How the runtime uses it:
    core = BrokerControllerCore(broker_config, store_config); core.load(now_ms)
    snap = core.snapshot()                       # -> every processor actor: ctx.load_snapshot
    fwd = core.apply_events(events, origin, now) # -> {group: [events]} to forward (origin excluded)
    if core.take_register_needed(): send core.build_register_requests(now)   # [(addr, cmd)]
    core.tick(now) -> ms until next wanted tick (offset persist, periodic register via
                      core.register_due(now))
    core.shutdown(now); send core.build_unregister_requests()
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import zlib
from typing import Final

from actors.broker.config import BrokerConfig, broker_config_path
from actors.broker.events import (
    ALL_GROUPS,
    SERVICE_GROUPS,
    BrokerConfigChanged,
    BrokerEvent,
    HaMasterChanged,
    TableVersions,
    TopicConfigChanged,
    TopicsDeleted,
)
from actors.broker.offsets import loads_config, offset_table_path, parse_offsets
from actors.broker.state import GROUPS_CHANGED, TOPICS_CHANGED, BrokerState
from actors.broker.subscription_group import group_config_from_obj
from actors.broker.topic_config import TopicConfig
from protocol.bodies import BodyError, loads_lenient
from protocol.codes import RequestCode as RC
from protocol.command import RemotingCommand
from store.config import StoreConfig, update_properties_text
from store.config_files import PersistFailures

log = logging.getLogger(__name__)
EVERY_GROUP: Final = ALL_GROUPS | SERVICE_GROUPS  # where events may go


class BrokerControllerCore(BrokerState):
    """Owns the authoritative broker state and its persistence."""

    def __init__(self, broker_config: BrokerConfig, store_config: StoreConfig) -> None:
        super().__init__(broker_config, store_config)
        root = store_config.storePathRootDir or "."
        self.config_dir = os.path.join(os.path.expanduser(root), "config")
        self._versions_changed = False
        self._register_needed = False
        self._barriers: list[tuple[str, int]] = []  # (origin group, token) awaiting a register
        self._next_offset_flush_ms: int | None = None
        self._persisted_offsets = b""  # the offset table's fingerprint when last written
        self._next_register_ms: int | None = None
        self.ha_port = 0  # the HA service's port once it listens (a master)
        # a slave: its master as the name server names it (RegisterBrokerResult)
        self.master_addr = ""
        self.master_ha_addr = ""
        self._master_changed = False
        # ConfigManager.persist: a file that cannot be written (a full disk) is logged once and
        # written again at the next offset flush; the state in memory stays as it is
        self._persist = PersistFailures()
        self._unwritten: set[str] = set()  # topics.json / subscriptionGroup.json to write again

    # --- paths ------------------------------------------------------------------------------

    def path(self, name: str) -> str:
        """config/<name> under storePathRootDir."""
        return os.path.join(self.config_dir, name)

    # --- load / persist ---------------------------------------------------------------------

    def load(self, now_ms: int, runtime_dir: str = "") -> None:
        """Read topics.json, subscriptionGroup.json, consumerOffset.json (with .bak); with a
        runtime directory, the consumer offsets go into the table every actor of the broker
        shares (this run's table, when a restarted controller finds it there, is kept: it is
        newer than the file)."""
        from store.config_files import read_json_with_bak

        text = read_json_with_bak(self.path("topics.json"))
        if text:
            obj = loads_config(text)
            for name, t in (obj.get("topicConfigTable") or {}).items():
                self.topics.put(TopicConfig.from_json_obj(t, name))
            dv = obj.get("dataVersion") or {}
            self.topic_version = (int(dv.get("counter", 0)), int(dv.get("timestamp", 0)))
        text = read_json_with_bak(self.path("subscriptionGroup.json"))
        if text:
            obj = loads_config(text)
            for name, g in (obj.get("subscriptionGroupTable") or {}).items():
                self.groups.put(group_config_from_obj(g, name))
            dv = obj.get("dataVersion") or {}
            self.group_version = (int(dv.get("counter", 0)), int(dv.get("timestamp", 0)))
        fresh = self.offsets.share(offset_table_path(runtime_dir)) if runtime_dir else True
        text = read_json_with_bak(self.path("consumerOffset.json"))
        if text and fresh:
            self.offsets.decode(text)
        self._persisted_offsets = self.offsets.fingerprint()
        if self.topic_version == (0, 0):
            self.topic_version = (1, now_ms)
        self._register_needed = True
        log.info(
            "broker config loaded topics=%d groups=%d offsets=%d",
            len(self.topics.table),
            len(self.groups.table),
            len(self.offsets.table),
        )

    def topics_json(self, pretty: bool = True) -> str:
        """TopicConfigSerializeWrapper text (topics.json / GET_ALL_TOPIC_CONFIG)."""
        obj = {
            "dataVersion": {"counter": self.topic_version[0], "timestamp": self.topic_version[1]},
            "topicConfigTable": {n: t.to_json_obj() for n, t in sorted(self.topics.table.items())},
        }
        if pretty:
            return json.dumps(obj, indent="\t", sort_keys=True)
        return json.dumps(obj, separators=(",", ":"), sort_keys=True)

    def groups_json(self) -> str:
        """subscriptionGroup.json text."""
        obj = {
            "dataVersion": {"counter": self.group_version[0], "timestamp": self.group_version[1]},
            "subscriptionGroupTable": {
                n: g.to_obj() for n, g in sorted(self.groups.table.items())
            },
        }
        return json.dumps(obj, indent="\t", sort_keys=True)

    def _write(self, name: str, text: str) -> bool:
        """Write config/<name>; False when it could not be (logged once, retried at ticks)."""
        ok = self._persist.write(self.path(name), text)
        if ok:
            self._unwritten.discard(name)
        else:
            self._unwritten.add(name)
        return ok

    def persist_config(self, updates: tuple[tuple[str, str], ...]) -> None:
        """Configuration.persist after UPDATE_BROKER_CONFIG: the updated names set in the
        broker's config file (broker_config_path: the -c file, which the next start reads, else
        config/broker.properties), in place; a file that cannot be written is logged."""
        from store.config_files import write_text_atomic

        path = broker_config_path(self.broker_config, self.store_config)
        try:
            try:
                with open(path, encoding="utf-8") as f:
                    old = f.read()
            except FileNotFoundError:
                old = ""
            write_text_atomic(path, update_properties_text(old, dict(updates)))
        except (OSError, UnicodeDecodeError) as exc:
            log.error("broker config update not persisted to %s: %s", path, exc)

    def persist_topics(self) -> None:
        """Write topics.json."""
        self._write("topics.json", self.topics_json())

    def persist_groups(self) -> None:
        """Write subscriptionGroup.json."""
        self._write("subscriptionGroup.json", self.groups_json())

    def persist_offsets(self, force: bool = False) -> None:
        """Write consumerOffset.json (only when an offset changed, unless forced)."""
        seen = self.offsets.fingerprint()
        if (force or seen != self._persisted_offsets) and self._write(
            "consumerOffset.json", self.offsets.encode(pretty=True)
        ):
            self._persisted_offsets = seen

    # --- snapshot and events ----------------------------------------------------------------

    def apply_events(
        self, events: list[BrokerEvent], origin: str, now_ms: int
    ) -> dict[str, list[BrokerEvent]]:
        """Apply a batch from one actor; persist; the events to forward per processor group."""
        topics_changed = groups_changed = False
        forward: dict[str, list[BrokerEvent]] = {}
        for ev in events:
            changed = self.apply_state(ev)
            if changed is None:
                log.warning("controller: unknown event %r", ev)
                continue
            topics_changed = topics_changed or bool(changed & TOPICS_CHANGED)
            groups_changed = groups_changed or bool(changed & GROUPS_CHANGED)
            if isinstance(ev, BrokerConfigChanged):  # persisted even when this copy had it
                self.persist_config(ev.updates)
                if any(k == "brokerPermission" for k, _ in ev.updates):
                    # a new topic data version, or the name servers keep the old queue perms
                    topics_changed = True
                    self._register_needed = True
            if isinstance(ev, TopicConfigChanged) and changed:
                self._register_needed = self._register_needed or ev.register
            elif isinstance(ev, TopicsDeleted):
                self._register_needed = True
            if isinstance(ev, TopicConfigChanged | TopicsDeleted | BrokerConfigChanged) and (
                    ev.barrier):  # the origin answers once this registration is done
                self._barriers.append((origin, ev.barrier))
                self._register_needed = True
            for group in ev.AUDIENCE & EVERY_GROUP:
                if group != origin:
                    forward.setdefault(group, []).append(ev)
        if topics_changed:
            self.topic_version = (self.topic_version[0] + 1, now_ms)
            self.persist_topics()
        if groups_changed:
            self.group_version = (self.group_version[0] + 1, now_ms)
            self.persist_groups()
        self._versions_changed = self._versions_changed or topics_changed or groups_changed
        return forward

    def take_version_events(self) -> dict[str, list[BrokerEvent]]:
        """{group: [TableVersions]} for the replicas that answer with the versions, once after
        a batch changed them (sent by the controller whoever delivered the batch itself)."""
        if not self._versions_changed:
            return {}
        self._versions_changed = False
        ev = TableVersions(self.topic_version, self.group_version)
        return {g: [ev] for g in TableVersions.AUDIENCE}

    # --- name-server registration -------------------------------------------------------------

    def take_register_needed(self) -> bool:
        """True once after a change that needs a registration with every name server."""
        needed = self._register_needed
        self._register_needed = False
        return needed

    def take_barriers(self) -> list[tuple[str, int]]:
        """(origin group, token) of replies held until the registration now needed is done.

        The runtime sends the REGISTER_BROKER requests (take_register_needed() is True whenever
        this is non-empty), waits for their responses (or registerBrokerTimeoutMills), then
        calls the origin core's release(token, now_ms).
        """
        out, self._barriers = self._barriers, []
        return out

    def register_due(self, now_ms: int) -> bool:
        """True every registerNameServerPeriod (clamped to 10-60 s)."""
        period = min(60_000, max(10_000, self.broker_config.registerNameServerPeriod))
        if self._next_register_ms is None or now_ms >= self._next_register_ms:
            self._next_register_ms = now_ms + period
            return True
        return False

    def register_body(self) -> bytes:
        """RegisterBrokerBody (uncompressed) with every topic, TBW102 included."""
        obj = {
            "filterServerList": [],
            "topicConfigSerializeWrapper": {
                "dataVersion": {
                    "counter": self.topic_version[0],
                    "timestamp": self.topic_version[1],
                },
                "topicConfigTable": {
                    n: self._registered_config(t).to_json_obj()
                    for n, t in sorted(self.topics.table.items())
                },
            },
        }
        return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()

    def _registered_config(self, tc: TopicConfig) -> TopicConfig:
        """A broker without write/read permission advertises its topics with that perm."""
        bp = self.broker_config.brokerPermission
        if bp & 6 == 6:
            return tc
        from dataclasses import replace

        return replace(tc, perm=bp)  # BrokerController.registerBrokerAll: the broker's perm

    def build_register_requests(self, now_ms: int) -> list[tuple[str, RemotingCommand]]:
        """REGISTER_BROKER for every name server: [(namesrv addr, command)]."""
        bc = self.broker_config
        body = self.register_body()
        ext = {
            "brokerName": bc.brokerName,
            "brokerAddr": bc.broker_addr,
            "clusterName": bc.brokerClusterName,
            "haServerAddr": self.ha_server_addr(),
            "brokerId": str(bc.brokerId),
            "compressed": "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        }
        return [
            (addr, RemotingCommand.request(RC.REGISTER_BROKER, dict(ext), body))
            for addr in bc.namesrv_addrs
        ]

    def build_unregister_requests(self) -> list[tuple[str, RemotingCommand]]:
        """UNREGISTER_BROKER for every name server."""
        bc = self.broker_config
        ext = {
            "brokerName": bc.brokerName,
            "brokerAddr": bc.broker_addr,
            "clusterName": bc.brokerClusterName,
            "brokerId": str(bc.brokerId),
        }
        return [
            (addr, RemotingCommand.request(RC.UNREGISTER_BROKER, dict(ext)))
            for addr in bc.namesrv_addrs
        ]

    def ha_server_addr(self) -> str:
        """brokerIP2 (else brokerIP1) and the HA service's port (listenPort + 1 until known)."""
        bc = self.broker_config
        return f"{bc.brokerIP2 or bc.brokerIP1}:{self.ha_port or bc.listenPort + 1}"

    def on_register_response(self, addr: str, resp: RemotingCommand) -> None:
        """Log the outcome of a registration; a slave learns its master (broker and HA
        addresses) from it (BrokerController.registerBrokerAll's result)."""
        if resp.code != 0:
            log.warning(
                "register broker to name server %s failed code=%d remark=%s",
                addr,
                resp.code,
                resp.remark,
            )
            return
        ext = resp.ext_fields or {}
        master = ext.get("masterAddr") or ""
        ha = ext.get("haServerAddr") or ""
        log.info("registered with name server %s master=%s", addr, master or None)
        if not self.broker_config.is_slave:
            return
        # doRegisterBrokerAll: the sync follows masterAddr (none: it stops); the HA address is
        # only ever replaced by another one
        self.master_addr = master
        if ha and ha != self.master_ha_addr:
            self.master_ha_addr = ha
            self._master_changed = True

    def order_topic_events(self, addr: str, resp: RemotingCommand) -> list[BrokerEvent]:
        """TopicConfigManager.updateOrderTopicConfig: a registration's reply body is the name
        server's ORDER_TOPIC_CONFIG table ({"table": {topic: "broker-a:4;..."}}; none when it
        has no such namespace); a topic here is an order topic exactly when it is listed. Only
        the first name server's reply counts (Java takes the first result), so two name
        servers with different tables cannot flip the topics at every registration."""
        addrs = self.broker_config.namesrv_addrs
        if resp.code != 0 or not resp.body or not addrs or addr != addrs[0]:
            return []
        try:
            obj = loads_lenient(bytes(resp.body))
        except BodyError as exc:
            log.warning("registration reply: unreadable order topic table: %s", exc)
            return []
        table = obj.get("table") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            return []
        return [
            TopicConfigChanged(dataclasses.replace(tc, order=name in table), register=False)
            for name, tc in sorted(self.topics.table.items())
            if tc.order != (name in table)
        ]

    def take_master_change(self) -> dict[str, list[BrokerEvent]]:
        """{group: [HaMasterChanged]} once after a slave learned a new master."""
        if not self._master_changed:
            return {}
        self._master_changed = False
        ev = HaMasterChanged(self.master_ha_addr, self.master_addr)
        return {g: [ev] for g in HaMasterChanged.AUDIENCE}

    # --- SlaveSynchronize: a slave copies its master's tables ---------------------------------

    SLAVE_SYNC_CODES = (
        RC.GET_ALL_TOPIC_CONFIG,
        RC.GET_ALL_CONSUMER_OFFSET,
        RC.GET_ALL_DELAY_OFFSET,
        RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    )

    def slave_sync_events(self, code: int, body: bytes) -> list[BrokerEvent]:
        """The events that bring this slave's table of `code` to its master's (syncTopicConfig,
        syncConsumerOffset, syncSubscriptionGroupConfig): every entry the master has is set; an
        entry only the slave has stays (Java drops it from the table; here that would drop its
        queues or offsets too). delayOffset.json is written here, and the master's offsets go
        straight into the shared offset table (no events)."""
        from actors.broker.events import SubscriptionGroupChanged

        text = bytes(body).decode("utf-8", "replace")
        events: list[BrokerEvent] = []
        if code == RC.GET_ALL_DELAY_OFFSET:
            if text.strip():
                from actors.broker.schedule import delay_offset_path

                self._persist.write(delay_offset_path(self.store_config), text)
            return events
        obj = loads_config(text) if code != RC.GET_ALL_CONSUMER_OFFSET else None
        if code == RC.GET_ALL_TOPIC_CONFIG and isinstance(obj, dict):
            theirs = {n: TopicConfig.from_json_obj(t, n)
                      for n, t in (obj.get("topicConfigTable") or {}).items()}  # fmt: skip
            # Java replaces the table (clear + putAll) without touching the store: a topic
            # only this slave has keeps its config here, its queues and offsets with it
            for name, tc in sorted(theirs.items()):
                if self.topics.get(name) != tc:
                    events.append(TopicConfigChanged(tc, register=True))
        elif code == RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG and isinstance(obj, dict):
            theirs_g = {n: group_config_from_obj(g, n)
                        for n, g in (obj.get("subscriptionGroupTable") or {}).items()}  # fmt: skip
            for name, cfg in sorted(theirs_g.items()):
                if self.groups.get(name) != cfg:
                    events.append(SubscriptionGroupChanged(cfg))
        elif code == RC.GET_ALL_CONSUMER_OFFSET:
            self.offsets.load_table(parse_offsets(text))
        return events

    # --- timers -------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> int:
        """Persist offsets every flushConsumerOffsetInterval; ms until the next tick."""
        interval = self.broker_config.flushConsumerOffsetInterval
        if self._next_offset_flush_ms is None:
            self._next_offset_flush_ms = now_ms + interval
        if now_ms >= self._next_offset_flush_ms:
            self.persist_offsets()
            if "topics.json" in self._unwritten:
                self.persist_topics()
            if "subscriptionGroup.json" in self._unwritten:
                self.persist_groups()
            self._next_offset_flush_ms = now_ms + interval
        waits = [self._next_offset_flush_ms - now_ms]
        if self._next_register_ms is not None:
            waits.append(self._next_register_ms - now_ms)
        return max(0, min(waits))

    def shutdown(self, now_ms: int) -> None:
        """Persist everything."""
        self.persist_offsets(force=True)
        self.persist_topics()
        self.persist_groups()
