"""structlog set up to write JSON lines to stderr; stdout belongs to the protocol."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, MutableMapping
from typing import IO, Any, TextIO

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure(level: str = "info", *, json: bool = True, out: TextIO | None = None) -> None:
    """Route structlog, the standard logging module and warnings to stderr (or `out`; a
    `Held` counts structlog's warnings and errors as they are logged, before rendering)."""
    out = out or sys.stderr
    numeric = _LEVELS[level]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    counted: list[structlog.typing.Processor] = [out.count] if isinstance(out, Held) else []
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            *counted,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.UnicodeDecoder(),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(out)
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


class Held:
    """Log lines held back from a terminal while a progress bar runs there: each written
    whole to `file` when given, passed to `echo` when given (printed above the bar), and the
    warnings and errors counted by event, for a summary after the bar: structlog's as they
    are logged (`count`, a processor `configure` adds), the standard logging module's from
    their plain lines."""

    def __init__(self, file: IO[str] | None = None,
                 echo: Callable[[str], None] | None = None) -> None:
        self.file = file
        self.echo = echo
        self.problems: dict[tuple[str, str], list[Any]] = {}  # (level, event) -> [n, example]
        self._partial = ""

    def write(self, text: str) -> int:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._line(line)
        return len(text)

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def isatty(self) -> bool:
        return False

    def _line(self, line: str) -> None:
        if not line.strip():
            return
        if self.file is not None:
            self.file.write(line + "\n")
        if self.echo is not None:
            self.echo(line)
        if not line.startswith("{"):  # structlog's lines (JSON) are counted by `count`
            self._problem(*_plain(line))

    def count(self, _logger: Any, _method: str,
              fields: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        """A structlog processor: a warning or error counted before it is rendered."""
        if fields.get("level") in _PROBLEMS:
            detail = ", ".join(f"{k}={v}" for k, v in fields.items()
                               if k not in ("level", "event", "timestamp", "exc_info",
                                            "exception"))
            self._problem(str(fields["level"]), str(fields.get("event", "")), detail[:200])
        return fields

    def _problem(self, level: str, event: str, detail: str) -> None:
        if level in _PROBLEMS:
            seen = self.problems.setdefault((level, event), [0, detail])
            seen[0] += 1

    def summary(self) -> list[str]:
        """One line per kind of warning or error: how many, and the first one's details."""
        out = []
        for (level, event), (count, detail) in self.problems.items():
            more = f" (and {count - 1} more)" if count > 1 else ""
            out.append(f"  {level} {event}: {detail}{more}")
        return out


_PROBLEMS = ("warning", "error", "critical")


def _plain(line: str) -> tuple[str, str, str]:
    """(level, event, the rest in short) of a line of the standard logging module
    (`LEVEL name: message`)."""
    level, _, rest = line.partition(" ")
    return level.lower(), rest.split(":", 1)[0], rest.split(":", 1)[-1].strip()[:200]
