"""SYNC_MASTER through the real send core and store (CommitLog.handleHA / GroupTransferService):
a WAIT send is answered once a slave reported its end offset, FLUSH_SLAVE_TIMEOUT after
slaveTimeout, SLAVE_NOT_AVAILABLE at once with no slave or one too far behind; the slave
figures come from the shared state page the master's HA service writes."""

from __future__ import annotations

import os
import select
from typing import Any

import pytest

from actors.runtime.wake import HA_ACKED, HA_TRANSFER, WakeReader, WakeWriter
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from store.state_page import OFF_HA_ACKED, OFF_HA_SLAVES
from tests.unit.broker.broker_kit import Broker, send_ext

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


def _slaves(b: Broker, count: int, acked: int) -> None:
    b.store.state.set(OFF_HA_SLAVES, count)
    b.store.state.set(OFF_HA_ACKED, acked)


def test_no_slave_answers_slave_not_available_at_once(sync_master: Broker) -> None:
    r = _send(sync_master)
    assert r is not None and r.code == RS.SLAVE_NOT_AVAILABLE and r.ext_fields["msgId"]
    assert sync_master.store.get_max_offset_in_queue("SyncT", 0) == 1  # stored all the same
    r = _send(sync_master, NO_WAIT)
    assert r is not None and r.code == RS.SUCCESS  # WAIT=false never waits


def test_answered_once_a_slave_has_it(sync_master: Broker) -> None:
    _slaves(sync_master, 1, 0)
    core = sync_master.cores["send"]
    assert _send(sync_master) is None  # waits for the slave
    end = sync_master.store.max_phy_offset
    core.flush_and_release(NOW + 5)
    assert sync_master.outbox.take() == []
    _slaves(sync_master, 1, end)
    assert core.flush_and_release(NOW + 6) == 1
    [(conn, resp)] = sync_master.outbox.take()
    assert conn == 3 and resp.code == RS.SUCCESS and resp.ext_fields["queueOffset"] == "0"


def test_slave_timeout_and_fall_behind(sync_master: Broker) -> None:
    core = sync_master.cores["send"]
    _slaves(sync_master, 1, 0)
    assert _send(sync_master) is None
    core.flush_and_release(NOW + core.slave_timeout_ms - 1)
    assert sync_master.outbox.take() == []
    core.flush_and_release(NOW + core.slave_timeout_ms)
    [(_, resp)] = sync_master.outbox.take()
    assert resp.code == RS.FLUSH_SLAVE_TIMEOUT and resp.ext_fields["msgId"]
    # a slave more than haSlaveFallbehindMax behind counts as none
    core.slave_fallbehind_max = 10
    r = _send(sync_master, now=NOW + 10_000)
    assert r is not None and r.code == RS.SLAVE_NOT_AVAILABLE


def test_sync_flush_and_sync_master_settle_together(tmp_path: Any) -> None:
    """Both waits settle before the answer, and the slave's outcome wins over the disk's
    (asyncPutMessage combines them with the replica status applied last)."""
    b = Broker(str(tmp_path / "store"), sync_flush=True, brokerRole="SYNC_MASTER")
    try:
        core = b.cores["send"]
        # no slave: SLAVE_NOT_AVAILABLE, still answered only once the flush covers it
        assert _send(b) is None  # SLAVE_NOT_AVAILABLE decided, the flush still to come
        core.flush_and_release(NOW + 1)
        [(_, r)] = b.outbox.take()
        assert r.code == RS.SLAVE_NOT_AVAILABLE
        # a slave that never catches up while the disk is fine: FLUSH_SLAVE_TIMEOUT
        _slaves(b, 1, 0)
        assert _send(b, now=NOW + 10) is None
        core.flush_and_release(NOW + 11)
        assert b.outbox.take() == []  # flushed, the slave still pending
        core.flush_and_release(NOW + 10 + core.slave_timeout_ms)
        [(_, r)] = b.outbox.take()
        assert r.code == RS.FLUSH_SLAVE_TIMEOUT
    finally:
        b.close()


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def test_a_parked_send_wakes_the_ha_service_and_an_ack_wakes_the_send_core(
    tmp_path: Any,
) -> None:
    """CommitLog.submitReplicaRequest's wakeup and notifyTransferSome, across processes: the
    core pokes the HA service's pipe once per batch that parked sends, and watches the pipe
    the HA service pokes when a slave acked more (both in the broker's runtime directory)."""
    rdir = str(tmp_path / "run")
    os.mkdir(rdir, 0o700)
    sync_master = Broker(str(tmp_path / "store"), brokerRole="SYNC_MASTER", runtime_dir=rdir)
    ha_side = WakeReader(os.path.join(rdir, HA_TRANSFER))  # what the HA service watches
    acks = WakeWriter(os.path.join(rdir, HA_ACKED))  # what it pokes
    core = sync_master.cores["send"]
    try:
        [acked_fd] = core.watch_fds()
        _slaves(sync_master, 1, 0)
        assert _send(sync_master) is None and _send(sync_master) is None  # two parked
        assert not _readable(ha_side.fd)
        assert core.next_look_ms(NOW + 1) == 1  # not poked yet: polled
        core.flush_and_release(NOW + 1)  # the runtime's after-batch call
        assert ha_side.drain() == 1  # one poke for the batch
        # the HA service has it, so an ack will wake the core: only the slave deadline is timed
        assert core.next_look_ms(NOW + 1) == core.slave_timeout_ms - 1
        core.flush_and_release(NOW + 2)
        assert ha_side.drain() == 0  # nothing newly parked: no poke
        _slaves(sync_master, 1, sync_master.store.max_phy_offset)
        assert acks.poke() and _readable(acked_fd)
        core.on_fd_ready([acked_fd], NOW + 3)
        assert not _readable(acked_fd)  # drained
        assert core.flush_and_release(NOW + 3) == 2
        assert [r.code for _, r in sync_master.outbox.take()] == [RS.SUCCESS, RS.SUCCESS]
    finally:
        ha_side.close()
        acks.close()
        sync_master.close()


def test_an_async_master_opens_no_wake_pipe(tmp_path: Any) -> None:
    rdir = str(tmp_path / "run")
    os.mkdir(rdir, 0o700)
    b = Broker(str(tmp_path / "store"), runtime_dir=rdir)
    try:
        assert b.cores["send"].watch_fds() == []
        assert os.listdir(rdir) == []
    finally:
        b.close()
