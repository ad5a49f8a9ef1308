"""A request-code switch shared by the processor cores that serve several codes.

Mirrors the `switch (request.getCode())` at the top of RocketMQ 4.9.x's processors
(AdminBrokerProcessor, ConsumerManageProcessor, ClientManageProcessor, QueryMessageProcessor,
namesrv DefaultRequestProcessor): look the handler up, turn a bad header (HeaderFieldError) or
a bad body into an error response, and never answer a oneway request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar

from actors.core import Request
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError

log = logging.getLogger(__name__)

Handler = Callable[[Request, int], RemotingCommand]

# What a malformed JSON body raises in the handlers (lenient parsers, int(), dict lookups).
BAD_BODY_ERRORS: tuple[type[Exception], ...] = (ValueError, KeyError, TypeError, AttributeError)


def not_supported(cmd: RemotingCommand) -> RemotingCommand:
    """REQUEST_CODE_NOT_SUPPORTED with Java's remark (note the leading space)."""
    return cmd.make_response(
        RS.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
    )


class CodeDispatchCore:
    """process() by request code; subclasses fill `handlers` and may override the hooks."""

    # Answer an unknown code even when the request is oneway (the broker's default
    # processor does); False => answer it like any other request.
    UNKNOWN_EVEN_ONEWAY: ClassVar[bool] = False
    # Reply at all to an unknown code (the name server returns null: no reply).
    REPLY_UNKNOWN: ClassVar[bool] = True
    # Extra exceptions that mean "bad request", answered SYSTEM_ERROR with the message.
    BAD_REQUEST_ERRORS: ClassVar[tuple[type[Exception], ...]] = ()
    BAD_REQUEST_REMARK: ClassVar[str] = "bad request body"

    handlers: dict[int, Handler]

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Run the handler for the code; None for oneway requests."""
        cmd = req.cmd
        handler = self.handlers.get(cmd.code)
        if handler is None:
            log.warning("request type %d not supported", cmd.code)
            if not self.REPLY_UNKNOWN:
                return None
            resp = not_supported(cmd)
            return resp if self.UNKNOWN_EVEN_ONEWAY or not cmd.is_oneway else None
        try:
            resp = handler(req, now_ms)
        except HeaderFieldError as e:
            resp = cmd.make_response(e.code, e.remark)
        except self.BAD_REQUEST_ERRORS as e:
            log.warning("bad request code=%d: %s", cmd.code, e)
            resp = cmd.make_response(RS.SYSTEM_ERROR, f"{self.BAD_REQUEST_REMARK}: {e}")
        return None if cmd.is_oneway else resp

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Nothing per connection unless overridden."""

    def tick(self, now_ms: int) -> int | None:
        """No timers unless overridden."""
        return None
