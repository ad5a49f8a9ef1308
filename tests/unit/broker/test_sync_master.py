"""SYNC_MASTER through the real send core, store and GroupTransferService core, linked as the kit
links them (CommitLog.handleHA / GroupTransferService): a WAIT send is handed to the transfer
service, which answers it once the HAService reports a slave has its end offset, or
FLUSH_SLAVE_TIMEOUT after slaveTimeout; SLAVE_NOT_AVAILABLE at once with no slave or one too
far behind (isSlaveOK reads the shared state page the HA service writes). While no transfer
service is linked (its actor is being replaced) the send core answers the waits itself from
the state page."""

from __future__ import annotations

import os
import select
from typing import Any

import pytest

from actors.broker.group_transfer import DONE_MS, GroupTransferService
from actors.core import Request
from actors.runtime.link_records import SlaveAcked
from actors.runtime.wake import HA_TRANSFER, WakeReader
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from store.state_page import OFF_HA_ACKED, OFF_HA_SLAVES
from tests.unit.broker.broker_kit import Broker, KitLink, send_ext, wire_cmd

NOW = 1_000_000
WAIT = "UNIQ_KEY\x01U\x02WAIT\x01true"
NO_WAIT = "UNIQ_KEY\x01U\x02WAIT\x01false"


@pytest.fixture
def sync_master(tmp_path: Any) -> Any:
    b = Broker(str(tmp_path / "store"), brokerRole="SYNC_MASTER")
    yield b
    b.close()


def _send(b: Broker, props: str = WAIT, now: int = NOW, conn: int = 3) -> Any:
    return b.call(RC.SEND_MESSAGE_V2, send_ext("SyncT", props=props), b"body", now_ms=now,
                  conn_id=conn)  # fmt: skip


def _slaves(b: Broker, count: int, acked: int, now: int = NOW) -> None:
    """What the HAService does when a slave reports: the state page, and SlaveAcked to the
    GroupTransferService (when it runs)."""
    b.store.state.set(OFF_HA_SLAVES, count)
    b.store.state.set(OFF_HA_ACKED, acked)
    transfer = b.cores.get("transfer")
    if transfer is not None:
        transfer.on_link_record(KitLink(b, "transfer", "HAService", 0), SlaveAcked(acked, count),
                                now)  # fmt: skip
        b.pump(now)


def test_no_slave_answers_slave_not_available_at_once(sync_master: Broker) -> None:
    r = _send(sync_master)
    assert r is not None and r.code == RS.SLAVE_NOT_AVAILABLE and r.ext_fields["msgId"]
    assert sync_master.store.get_max_offset_in_queue("SyncT", 0) == 1  # stored all the same
    r = _send(sync_master, NO_WAIT)
    assert r is not None and r.code == RS.SUCCESS  # WAIT=false never waits


def test_answered_once_a_slave_has_it(sync_master: Broker) -> None:
    _slaves(sync_master, 1, 0)
    send, transfer = sync_master.cores["send"], sync_master.cores["transfer"]
    assert _send(sync_master) is None  # handed to the GroupTransferService
    assert len(send.transfer.open) == 1 and len(transfer.waits) == 1 and send.waiting == []
    end = sync_master.store.max_phy_offset
    _slaves(sync_master, 1, end - 1)  # not all of it yet
    assert sync_master.outbox.take() == []
    _slaves(sync_master, 1, end)
    [(conn, resp)] = sync_master.outbox.take()
    assert conn == 3 and resp.code == RS.SUCCESS and resp.ext_fields["queueOffset"] == "0"
    assert len(send.transfer.open) == 1  # the writer hears of it a little later
    transfer.tick(NOW + DONE_MS)
    sync_master.pump(NOW + DONE_MS)
    assert send.transfer.open == {}  # TransferDone came back
    # a send whose bytes a slave already has is answered as the service takes it
    assert _send(sync_master, now=NOW + 1) is None
    _slaves(sync_master, 1, sync_master.store.max_phy_offset)
    [(_, resp)] = sync_master.outbox.take()
    assert resp.code == RS.SUCCESS and resp.ext_fields["queueOffset"] == "1"


def test_slave_timeout_and_fall_behind(sync_master: Broker) -> None:
    transfer = sync_master.cores["transfer"]
    _slaves(sync_master, 1, 0)
    assert _send(sync_master) is None
    timeout = sync_master.cores["send"].slave_timeout_ms
    assert transfer.tick(NOW + timeout - 1) == 1
    assert sync_master.outbox.take() == []
    assert transfer.tick(NOW + timeout) is None
    sync_master.pump(NOW + timeout)
    [(_, resp)] = sync_master.outbox.take()
    assert resp.code == RS.FLUSH_SLAVE_TIMEOUT and resp.ext_fields["msgId"]
    transfer.tick(NOW + timeout + DONE_MS)
    sync_master.pump(NOW + timeout + DONE_MS)
    assert sync_master.cores["send"].transfer.open == {}
    # a slave more than haSlaveFallbehindMax behind counts as none
    sync_master.cores["send"].slave_fallbehind_max = 10
    r = _send(sync_master, now=NOW + 10_000)
    assert r is not None and r.code == RS.SLAVE_NOT_AVAILABLE


def test_sync_flush_and_sync_master_settle_together(tmp_path: Any) -> None:
    """Both waits settle before the answer, and the slave's outcome wins over the disk's
    (asyncPutMessage combines them with the replica status applied last): the flush is
    waited here, then the send goes to the GroupTransferService."""
    b = Broker(str(tmp_path / "store"), sync_flush=True, brokerRole="SYNC_MASTER")
    try:
        core, transfer = b.cores["send"], b.cores["transfer"]
        # no slave: SLAVE_NOT_AVAILABLE, still answered only once the flush covers it
        assert _send(b) is None  # SLAVE_NOT_AVAILABLE decided, the flush still to come
        core.flush_and_release(NOW + 1)
        [(_, r)] = b.outbox.take()
        assert r.code == RS.SLAVE_NOT_AVAILABLE
        # a slave that never catches up while the disk is fine: FLUSH_SLAVE_TIMEOUT
        _slaves(b, 1, 0)
        assert _send(b, now=NOW + 10) is None
        assert len(core.waiting) == 1 and transfer.waits == []  # the flush first
        core.flush_and_release(NOW + 11)
        b.pump(NOW + 11)
        assert b.outbox.take() == [] and core.waiting == [] and len(transfer.waits) == 1
        transfer.tick(NOW + 10 + core.slave_timeout_ms)
        [(_, r)] = b.outbox.take()
        assert r.code == RS.FLUSH_SLAVE_TIMEOUT
    finally:
        b.close()


def test_a_killed_transfer_service_loses_no_send(sync_master: Broker) -> None:
    """Its waits go back to the send core, which answers them from the state page while no
    service is linked, and hands what is left to the next one."""
    send = sync_master.cores["send"]
    _slaves(sync_master, 1, 0)
    assert _send(sync_master, conn=5) is None and _send(sync_master, conn=6) is None
    first_end = sync_master.store.max_phy_offset // 2  # two records of the same size
    assert len(send.transfer.open) == 2
    sync_master.cut("transfer", NOW + 1)  # kill -9: its link closes
    assert len(send.waiting) == 2 and send.transfer.open == {}
    assert send.next_look_ms(NOW + 1) == 1  # looked at every millisecond meanwhile
    sync_master.store.state.set(OFF_HA_ACKED, first_end)  # the HA service's page: the first
    assert send.flush_and_release(NOW + 2) == 1
    [(conn, resp)] = sync_master.outbox.take()
    assert conn == 5 and resp.code == RS.SUCCESS
    # the replacement links: the other wait goes to it, and it answers it
    sync_master.cores["transfer"] = GroupTransferService(sync_master.ctxs["transfer"])
    sync_master.link("send", "transfer")
    send.flush_and_release(NOW + 3)
    sync_master.pump(NOW + 3)
    assert send.waiting == [] and len(send.transfer.open) == 1
    _slaves(sync_master, 1, sync_master.store.max_phy_offset, NOW + 4)
    [(conn, resp)] = sync_master.outbox.take()
    assert conn == 6 and resp.code == RS.SUCCESS


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def test_a_batch_that_hands_sends_over_wakes_the_ha_service(tmp_path: Any) -> None:
    """CommitLog.submitReplicaRequest's wakeup, across processes: the core pokes the HA
    service's pipe (in the broker's runtime directory) once per batch that hands sends to the
    GroupTransferService, and only once that batch's output left (after_flush): the waits and
    the batch's events reach their peers before the slave can ack."""
    rdir = str(tmp_path / "run")
    os.mkdir(rdir, 0o700)
    sync_master = Broker(str(tmp_path / "store"), brokerRole="SYNC_MASTER", runtime_dir=rdir)
    ha_side = WakeReader(os.path.join(rdir, HA_TRANSFER))  # what the HA service watches
    core = sync_master.cores["send"]
    try:
        assert core.watch_fds() == []  # acks reach the GroupTransferService, not this core
        _slaves(sync_master, 1, 0)
        assert not _readable(ha_side.fd)
        for _ in range(2):  # one batch of two sends, the first creates the topic
            assert core.process(_req(), NOW) is None
        core.end_batch(NOW)  # the runtime's after-batch calls
        assert ha_side.drain() == 0
        core.after_flush(NOW)
        assert ha_side.drain() == 1  # one poke for the batch, once its output left
        sync_master.pump(NOW)
        assert len(sync_master.cores["transfer"].waits) == 2
        assert core.process(_req(), NOW + 1) is None  # the topic exists now: no event
        core.end_batch(NOW + 1)
        assert ha_side.drain() == 0  # not before the output left
        core.after_flush(NOW + 1)
        assert ha_side.drain() == 1
        core.end_batch(NOW + 2)
        core.after_flush(NOW + 2)
        assert ha_side.drain() == 0  # nothing new handed over: no poke
        sync_master.pump(NOW + 2)
        assert len(sync_master.cores["transfer"].waits) == 3
    finally:
        ha_side.close()
        sync_master.close()


def _req() -> Request:
    return Request(3, ("127.0.0.1", 40000),
                   wire_cmd(RC.SEND_MESSAGE_V2, send_ext("SyncT", props=WAIT), b"body"), 0)


def test_an_async_master_opens_no_wake_pipe(tmp_path: Any) -> None:
    rdir = str(tmp_path / "run")
    os.mkdir(rdir, 0o700)
    b = Broker(str(tmp_path / "store"), runtime_dir=rdir)
    try:
        assert b.cores["send"].watch_fds() == []
        assert os.listdir(rdir) == []
        assert "transfer" not in b.cores
    finally:
        b.close()
