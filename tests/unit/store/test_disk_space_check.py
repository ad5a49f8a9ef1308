"""The disk check's pure parts (issue #20): RunningFlags, disk_space_verdict (isSpaceFull),
CreateRetryGate (CREATE_MAPEDFILE_FAILED's retry), the remark's figures, the config names."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from actors.broker.processors.abstract_send import service_not_available_remark
from store.clean_service import disk_space_verdict, disk_usage_ratio, disk_util
from store.config import StoreConfig
from store.config_files import PersistFailures
from store.create_retry_gate import CreateRetryGate
from store.running_flags import RunningFlags


def test_running_flags_disk_full_and_ok_say_when_they_change() -> None:
    f = RunningFlags()
    assert f.is_writeable() and f.is_cq_writeable() and not f.is_disk_full()
    assert f.get_and_make_disk_full() is True  # OK -> full: a change
    assert f.get_and_make_disk_full() is False  # full already
    assert not f.is_writeable() and f.is_cq_writeable() and f.is_disk_full()
    assert f.get_and_make_disk_ok() is False  # full -> OK: a change (it was not OK)
    assert f.get_and_make_disk_ok() is True
    assert f.is_writeable()
    assert f.make_index_file_error() is True and f.make_index_file_error() is False
    assert not f.is_writeable() and not f.is_cq_writeable() and f.is_index_file_error()
    f.clear_index_file_error()
    assert f.is_writeable()


@pytest.mark.parametrize(
    ("physic", "logics", "full"),
    [
        (0.89, 0.89, False),
        (0.90, 0.90, False),  # strictly above, as Java compares
        (0.91, 0.50, True),
        (0.50, 0.93, True),  # the consume queues' partition counts too
        (-1.0, 0.95, True),
        (-1.0, -1.0, False),  # nothing measurable: not full
    ],
)
def test_verdict_marks_full_above_the_warning_level(physic: float, logics: float,
                                                    full: bool) -> None:  # fmt: skip
    flags = RunningFlags()
    v = disk_space_verdict(flags, physic, logics, 90.0)
    assert v.full is full
    assert v.changed is full  # from OK: only a full verdict changes anything
    assert flags.is_writeable() is not full


def test_verdict_changes_once_each_way() -> None:
    flags = RunningFlags()
    seen = [disk_space_verdict(flags, r, r, 90.0) for r in (0.5, 0.95, 0.96, 0.97, 0.4, 0.3)]
    assert [v.changed for v in seen] == [False, True, False, False, True, False]
    assert [v.full for v in seen] == [False, True, True, True, False, False]
    assert seen[1].physic == 95.0 and seen[1].logics == 95.0


def test_create_retry_gate() -> None:
    gate = CreateRetryGate(1000)
    assert gate.may_try(0) and not gate.failing
    assert gate.succeeded() is False  # nothing to recover from
    assert gate.failed(5_000, "ENOSPC") is True
    assert gate.failed(5_500, "ENOSPC") is False  # still failing: not logged again
    assert gate.failing and gate.error == "ENOSPC"
    assert not gate.may_try(6_499)
    assert gate.may_try(6_500)
    assert gate.succeeded() is True
    assert gate.may_try(6_501) and not gate.failing


def test_disk_usage_ratio_like_java(tmp_path: Path) -> None:
    r = disk_usage_ratio(str(tmp_path))
    assert 0.0 <= r <= 1.0
    assert r * 100 == pytest.approx(round(r * 100))  # whole percents, rounded up
    st = os.statvfs(tmp_path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    assert r >= used / (used + st.f_bavail * st.f_frsize) - 1e-9
    assert disk_usage_ratio(str(tmp_path / "missing")) == -1.0


def test_disk_util_and_the_remark(tmp_path: Path) -> None:
    cfg = StoreConfig(storePathRootDir=str(tmp_path))
    usage = {cfg.commitlog_path: 0.95, str(tmp_path / "consumequeue"): 0.9}
    assert disk_util(cfg, lambda p: usage.get(p, -1.0)) == "CL:  0.95 CQ:  0.90 INDEX: -1.00"
    remark = service_not_available_remark(cfg)
    assert re.fullmatch(
        r"service not available now\. It may be caused by one of the following reasons: the "
        r"broker's disk is full \[CL: -1\.00 CQ: -1\.00 INDEX: -1\.00\], messages are put to "
        r"the slave, message store has been shut down, etc\.", remark), remark  # fmt: skip


def test_config_takes_java_system_property_names() -> None:
    cfg = StoreConfig.from_properties({
        "rocketmq.broker.diskSpaceWarningLevelRatio": "0.95",
        "rocketmq.broker.diskSpaceCleanForciblyRatio": "0.9",
        "diskMaxUsedSpaceRatio": "80", "cleanResourceInterval": "500"})  # fmt: skip
    assert cfg.diskSpaceWarningLevelRatio == 95.0
    assert cfg.diskSpaceCleanForciblyRatio == 90.0
    assert (cfg.diskMaxUsedSpaceRatio, cfg.cleanResourceInterval) == (80, 500)
    assert StoreConfig().diskSpaceWarningLevelRatio == 90.0  # Java's defaults
    assert StoreConfig().diskSpaceCleanForciblyRatio == 85.0
    with pytest.raises(ValueError, match=r"rocketmq\.broker\.diskSpaceWarningLevelRatio"):
        StoreConfig.from_properties({"rocketmq.broker.diskSpaceWarningLevelRatio": "90"})
    with pytest.raises(ValueError, match=r"rocketmq\.broker\.diskSpaceWarningLevelRatio: expected"):
        StoreConfig.from_properties({"rocketmq.broker.diskSpaceWarningLevelRatio": "x"})
    with pytest.raises(ValueError, match="a percent"):  # a fraction under our own name
        StoreConfig.from_properties({"diskSpaceWarningLevelRatio": "0.9"})


def test_persist_failures_log_once_per_file_and_clean_up(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture
                                                        ) -> None:  # fmt: skip
    blocker = tmp_path / "config"
    blocker.write_text("a file where the directory should be")
    path = str(blocker / "topics.json")
    writer = PersistFailures()
    with caplog.at_level(logging.INFO, logger="store.config_files"):
        assert writer.write(path, "{}") is False
        assert writer.write(path, "{}") is False
        assert writer.write(path, "{}") is False
        blocker.unlink()
        assert writer.write(path, '{"a": 1}') is True
        assert writer.write(path, '{"a": 2}') is True
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if "failed" in m]) == 1, lines
    assert len([m for m in lines if "works again" in m]) == 1, lines
    assert not any(r.exc_info for r in caplog.records)  # no tracebacks
    assert (tmp_path / "config" / "topics.json").read_text() == '{"a": 2}'
    assert sorted(os.listdir(tmp_path / "config")) == ["topics.json", "topics.json.bak"]
