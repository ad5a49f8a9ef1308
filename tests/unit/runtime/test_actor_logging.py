"""A log file that cannot be opened loses records, never the process that logs them.

Found in session 19: an earlier in-process cluster left its log path behind in the process
(deploy.actor_logging), its directory was deleted, and the next client instance forked from
that process died of its first log line: logging.FileHandler opens a delayed file outside its
own error handling."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from deploy import actor_logging


def test_a_log_directory_that_is_gone_does_not_raise(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    saved = dict(actor_logging._state), dict(actor_logging._handler)
    try:
        actor_logging._state.update(path=str(gone / "actormq.log"), level=logging.INFO)
        actor_logging._handler.clear()
        os.rmdir(gone)
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "lost", None, None)
        actor_logging.DirectHandler().emit(record)  # raised FileNotFoundError before
        assert not (gone / "actormq.log").exists()
    finally:
        actor_logging._state.clear()
        actor_logging._state.update(saved[0])
        actor_logging._handler.clear()
        actor_logging._handler.update(saved[1])
