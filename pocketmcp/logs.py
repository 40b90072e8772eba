"""structlog set up to write JSON lines to stderr; stdout belongs to the protocol."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure(level: str = "info", *, json: bool = True) -> None:
    """Route structlog, the standard logging module and warnings to stderr."""
    numeric = _LEVELS[level]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.UnicodeDecoder(),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    logging.captureWarnings(True)


def get(name: str) -> structlog.typing.FilteringBoundLogger:
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger


def events(name: str) -> Callable[[dict[str, Any]], None]:
    """A hook that logs each event dict as one line: its "event" key names the line."""
    log = get(name)

    def on_event(event: dict[str, Any]) -> None:
        fields = dict(event)
        kind = fields.pop("event")
        log.info(kind, **fields)

    return on_event
