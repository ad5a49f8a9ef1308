"""The consumer's answers to broker requests: the consumer half of
client/impl/ClientRemotingProcessor.java (getConsumerRunningInfo, consumeMessageDirectly,
resetOffset, getConsumeStatus) and ConsumerImplBase.consumerRunningInfo, RocketMQ 4.9.x.

The RebalanceServiceActor relays them over the channel; they are answered on the consumer's
scheduler thread (consumeMessageDirectly runs the user's handler) and the answer goes back the
same way. Bodies are written as fastjson writes them (object-keyed maps for MessageQueue keys),
so mqadmin consumerStatus / consumeMessage and the dashboard read them.
"""

from __future__ import annotations

import json
import logging
import time

from actors.client.consumer.mq_consumer_inner import MQConsumerInner
from actors.client.records import MessageExt
from protocol.bodies import MessageQueue, dumps_object_map, loads_object_map
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerStatusRequestHeader,
    ResetOffsetRequestHeader,
)
from protocol.message import decode_message_ext

log = logging.getLogger(__name__)

CLIENT_VERSION = "V4_9_8"


def answer_relayed(impl: MQConsumerInner, rid: int, addr: str, frame: bytes) -> None:
    """Serve one relayed request; the answer (if one is owed) goes back to the broker."""
    try:
        cmd = RemotingCommand.decode(memoryview(frame)[4:])
    except ProtocolError as exc:
        log.warning("relayed request undecodable: %s", exc)
        return
    resp: RemotingCommand | None
    try:
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            resp = cmd.make_response(ResponseCode.SUCCESS, None, None, running_info(impl))
        elif cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            resp = consume_directly(impl, cmd)
        elif cmd.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            h = GetConsumerStatusRequestHeader.from_ext(cmd.ext_fields)
            resp = cmd.make_response(ResponseCode.SUCCESS, None, None,
                                     consume_status(impl, h.topic))
        elif cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            reset_offset(impl, cmd)
            resp = None
        else:
            resp = cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                     f" request type {cmd.code} not supported")
    except Exception as exc:
        log.exception("consumer %s: relayed request %d failed", impl.group, cmd.code)
        resp = cmd.make_response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
    if resp is not None and not cmd.flag & 2 and impl.services is not None:
        impl.services.relay_answer(rid, resp.encode())


def base_properties(impl: MQConsumerInner) -> dict[str, str]:
    """The running-info properties every consumer reports (Java's field names)."""
    cfg = impl.cfg
    return {
        "consumerGroup": impl.group, "messageModel": impl.model.name,
        "consumeFromWhere": cfg.consume_from_where.name,
        "allocateMessageQueueStrategy": type(cfg.strategy).__name__,
        "pullThresholdForQueue": str(cfg.pull_threshold_for_queue),
        "pullThresholdSizeForQueue": str(cfg.pull_threshold_size_for_queue_mib),
        "pullThresholdForTopic": str(cfg.pull_threshold_for_topic),
        "pullThresholdSizeForTopic": str(cfg.pull_threshold_size_for_topic_mib),
        "pullBatchSize": str(cfg.pull_batch),
        "instanceName": impl.client_id.split("@", 1)[-1],
        "clientIP": impl.client_id.split("@", 1)[0],
        "PROP_NAMESERVER_ADDR": ";".join(impl.handle.config.namesrv_addrs)
        if impl.handle else "",
        "PROP_CONSUME_TYPE": impl.CONSUME_TYPE.name,
        "PROP_CONSUMER_START_TIMESTAMP": str(impl.start_ms),
    }


def running_info(impl: MQConsumerInner) -> bytes:
    """ConsumerRunningInfo JSON: properties, subscriptionSet, mqTable, statusTable."""
    store = impl.offset_store
    mq_rows = []
    for mq, pq in sorted(impl.table.items()):
        commit = store.read_memory(mq) if store is not None else -1
        mq_rows.append((mq.to_obj(), pq.info(commit).to_wire()))
    subs = sorted((s.to_obj() for s in impl.all_subscriptions()), key=lambda s: s["topic"])
    status = {t: s.to_wire() for t, s in sorted(impl.stats.status_table().items())}
    return (b'{"jstack":"","mqTable":' + dumps_object_map(mq_rows)
            + b',"properties":' + json.dumps(impl.running_properties(), sort_keys=True).encode()
            + b',"statusTable":' + json.dumps(status, sort_keys=True).encode()
            + b',"subscriptionSet":' + json.dumps(subs, separators=(",", ":")).encode() + b"}")


def consume_status(impl: MQConsumerInner, topic: str) -> bytes:
    """GetConsumerStatusBody: this client's offsets of topic."""
    store = impl.offset_store
    table = store.clone_offset_table(topic) if store is not None else {}
    rows = [(mq.to_obj(), off) for mq, off in sorted(table.items())]
    return b'{"consumerTable":{},"messageQueueTable":' + dumps_object_map(rows) + b"}"


def consume_directly(impl: MQConsumerInner, cmd: RemotingCommand) -> RemotingCommand:
    """consumeMessageDirectly: ConsumeMessageDirectlyResult of the consumer's handler."""
    h = ConsumeMessageDirectlyResultRequestHeader.from_ext(cmd.ext_fields)
    w = decode_message_ext(bytes(cmd.body))
    mq = MessageQueue(w.topic, h.broker_name or "", w.queue_id)
    begin = time.monotonic()
    try:
        cr, remark, auto_commit, order = impl.consume_message_directly(
            MessageExt.from_wire(w, mq.broker_name), mq)
    except NotImplementedError as exc:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
    body = {"autoCommit": auto_commit, "consumeResult": cr, "order": order, "remark": remark,
            "spentTimeMills": int((time.monotonic() - begin) * 1000)}
    return cmd.make_response(ResponseCode.SUCCESS, None, None,
                             json.dumps(body, sort_keys=True).encode())


def reset_offset(impl: MQConsumerInner, cmd: RemotingCommand) -> None:
    """resetOffset: drop the topic's queues, store the given offsets, take the queues again."""
    h = ResetOffsetRequestHeader.from_ext(cmd.ext_fields)
    text = bytes(cmd.body).decode("utf-8")
    at = text.find('"offsetTable":')
    pairs, _ = loads_object_map(text, text.index("{", at + 14)) if at >= 0 else ([], 0)
    offsets = {MessageQueue.from_obj(k): int(v) for k, v in pairs}
    log.info("consumer %s: reset offsets of %s to %s", impl.group, h.topic,
             {f"{m.broker_name}/{m.queue_id}": o for m, o in offsets.items()})
    reset_offsets(impl, h.topic, offsets)


def reset_offsets(impl: MQConsumerInner, topic: str, offsets: dict[MessageQueue, int]) -> None:
    """resetOffset: held queues of topic are dropped (cached messages discarded), their
    offsets stored and committed, and they are taken again from there (scheduler thread).

    A pull of those queues that is out carries the old commit offset, which the broker stores
    when it gets it: the reset offsets are committed after it (commit_final; Java sleeps 10 s
    here for the same reason)."""
    dropped = []
    for mq, off in offsets.items():
        if mq.topic != topic:
            continue
        with impl.lock:
            pq = impl.table.pop(mq, None)
        if pq is None:
            continue
        pq.dropped = True
        pq.clear()
        dropped.append((mq, off, pq))
    if not dropped:
        return
    store = impl.offset_store
    if store is not None:
        for mq, off, _pq in dropped:
            store.update_offset(mq, off, False)
        impl.commit_final([(mq, pq) for mq, _off, pq in dropped])
        for mq, _off, _pq in dropped:
            store.remove_offset(mq)
    if impl.services is not None:
        impl.services.revoked(impl.group, [mq for mq, _off, _pq in dropped])

