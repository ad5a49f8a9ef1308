"""SYNC_MASTER through the real send core and store (CommitLog.handleHA / GroupTransferService):
a WAIT send is answered once a slave reported its end offset, FLUSH_SLAVE_TIMEOUT after
slaveTimeout, SLAVE_NOT_AVAILABLE at once with no slave or one too far behind; the slave
figures come from the shared state page the master's HA service writes."""

from __future__ import annotations

from typing import Any

import pytest

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
