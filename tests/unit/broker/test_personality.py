"""The cores of both personalities declare the optional capabilities their actors look for."""

from __future__ import annotations

from broker_kit import Broker

from actors.broker.config import BrokerConfig
from actors.broker.personality import (
    BROKER,
    BarrierController,
    HaController,
    HostedContext,
    NamesrvController,
    VersionedController,
)
from actors.core import (
    BarrierCore,
    BatchEndCore,
    ClosingCore,
    HoldingCore,
    LinkedCore,
    ObservedHoldCore,
    StoreShutdownCore,
)
from actors.runtime.processor_host import ChannelOutbox
from store.config import StoreConfig
from tests.support import echo_broker as echo

CONTROLLER_CAPABILITIES = (VersionedController, BarrierController, NamesrvController, HaController)


def test_real_controller_has_every_capability(tmp_path) -> None:
    """A renamed method would switch a capability off silently: the real core has them all."""
    root = tmp_path / "store"
    run = tmp_path / "run"
    run.mkdir()
    bc = BrokerConfig(namesrvAddr="127.0.0.1:9876")
    core = BROKER.make_controller(bc, StoreConfig(storePathRootDir=str(root)), 0, str(run))
    try:
        missing = [c.__name__ for c in CONTROLLER_CAPABILITIES if not isinstance(core, c)]
        assert missing == []
        assert isinstance(core, HaController) and core.master_addr == ""
        assert core.slave_sync_codes  # one SlaveSynchronize round asks for something
    finally:
        core.shutdown(0)


def test_echo_controller_has_no_optional_capability(tmp_path) -> None:
    core = echo.ECHO.make_controller(BrokerConfig(), StoreConfig(storePathRootDir=str(tmp_path)),
                                     0)  # fmt: skip
    assert [c.__name__ for c in CONTROLLER_CAPABILITIES if isinstance(core, c)] == []


def test_broker_cores_declare_their_hooks(broker: Broker) -> None:
    """The pull core hands its suspended pulls (recorded in the request ledger) to the hold
    service over a link and closes its stats; the hold service holds them and ends each batch
    (its holds report); the send core persists before the store shuts down, holds replies
    behind the registration barrier and sends each batch's notices on its links; the
    schedule service persists when its actor stops."""
    pull, send, hold = broker.cores["pull"], broker.cores["send"], broker.cores["hold"]
    assert isinstance(pull, ObservedHoldCore) and isinstance(pull, LinkedCore)
    assert isinstance(pull, ClosingCore) and not isinstance(pull, HoldingCore)
    assert isinstance(hold, HoldingCore) and isinstance(hold, LinkedCore)
    assert isinstance(hold, BatchEndCore)
    assert isinstance(send, StoreShutdownCore) and isinstance(send, BarrierCore)
    assert isinstance(send, LinkedCore) and isinstance(send, BatchEndCore)
    assert not isinstance(send, HoldingCore)
    assert isinstance(broker.cores["schedule"], ClosingCore)
    assert isinstance(broker.cores["schedule"], LinkedCore)
    assert isinstance(broker.cores["txcheck"], LinkedCore)
    assert "transfer" not in broker.cores  # an ASYNC_MASTER runs no GroupTransferService
    assert all(isinstance(ctx, HostedContext) for ctx in broker.ctxs.values())


def test_echo_cores_and_context(tmp_path) -> None:
    ctx = echo.ECHO.make_context(BrokerConfig(), StoreConfig(storePathRootDir=str(tmp_path)),
                                 group="pull", outbox=ChannelOutbox(), now_ms=0)  # fmt: skip
    core = echo.EchoCore(ctx)
    assert isinstance(core, LinkedCore) and isinstance(core, BatchEndCore)
    assert not isinstance(core, HoldingCore) and not isinstance(core, StoreShutdownCore)
    assert not isinstance(ctx, HostedContext)
