"""When a put may try again to create the store file it needs, after one could not be made.

Mirrors the CREATE_MAPEDFILE_FAILED outcome of store/CommitLog.java's asyncPutMessage (RocketMQ
4.9.x has no class of its own for it): once a file could not be created (a full disk), the puts
that need one are refused at once for a while instead of each trying again.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class CreateRetryGate:
    """Whether a put may try to create a store file now (CommitLog's CREATE_MAPEDFILE_FAILED).

    Once a file could not be created (a full disk), puts that need one are refused at once for
    retry_ms rather than each trying again: every try opens the file, allocates all of it and
    removes it again (and on tmpfs the allocation of a few MiB pages first, then frees them).
    `failed` / `succeeded` say whether the state changed, so it is logged once each way. A pure
    core: time is passed in."""

    __slots__ = ("error", "failed_at_ms", "retry_ms")

    def __init__(self, retry_ms: int) -> None:
        self.retry_ms = retry_ms
        self.failed_at_ms = -1  # -1: creating files works
        self.error = ""

    @property
    def failing(self) -> bool:
        """The last try failed."""
        return self.failed_at_ms >= 0

    def may_try(self, now_ms: int) -> bool:
        """No failure, or the last one is retry_ms old."""
        return self.failed_at_ms < 0 or now_ms - self.failed_at_ms >= self.retry_ms

    def failed(self, now_ms: int, error: str) -> bool:
        """A try failed; True when creating files worked until now (log it)."""
        first = self.failed_at_ms < 0
        self.failed_at_ms = now_ms
        self.error = error
        return first

    def succeeded(self) -> bool:
        """A try (or a file made elsewhere) worked; True when it was failing (log it)."""
        was = self.failed_at_ms >= 0
        self.failed_at_ms = -1
        self.error = ""
        return was

    def note_failed(self, now_ms: int, exc: OSError) -> None:
        """failed(), logged once until a file can be made again."""
        if self.failed(now_ms, str(exc)):
            log.error("a store file cannot be created (%s): sends that need a new file are "
                      "refused (CREATE_MAPEDFILE_FAILED) until there is space", exc)

    def note_created(self) -> None:
        """succeeded(), logged when it was failing."""
        if self.succeeded():
            log.info("store files can be created again: sends accepted")
