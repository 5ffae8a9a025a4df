"""Structured logging: configuration for the edge, and the engine's per-instance event log.

Library code takes ``structlog.get_logger()`` and never configures anything; the command line
(or an orchestrator script) calls :func:`configure` once. Every instance also keeps a JSON-lines
log file beside its journal; :class:`EventLog` sends each event to both, and keeps tracebacks out
of the terminal: they go to the file only.
"""

from __future__ import annotations

import sys
from typing import Any, Literal, TextIO

import structlog

from fsm.clock import Clock
from fsm.journal import LineLog

__all__ = ["EventLog", "configure"]

LogFormat = Literal["console", "json"]
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def configure(
    fmt: LogFormat = "console", level: str = "info", stream: TextIO | None = None
) -> None:
    """Configure structlog for a process: JSON lines or readable console lines on ``stream``."""
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=True)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=_no_traceback)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, 20)),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def _no_traceback(stream: TextIO, exc_info: Any) -> None:
    """Console output never shows tracebacks; they are in the instance log file."""


class EventLog:
    """One event, two sinks: the structlog logger and the instance's JSON-lines file."""

    def __init__(self, logger: Any, file: LineLog | None, clock: Clock, **bound: Any) -> None:
        self.logger = logger.bind(**bound) if bound else logger
        self.file = file
        self.clock = clock
        self.bound = bound

    def bind(self, **values: Any) -> EventLog:
        """A copy with more context values."""
        return EventLog(self.logger, self.file, self.clock, **{**self.bound, **values})

    def info(self, event: str, /, **fields: Any) -> None:
        """Record an informational event."""
        self._emit("info", event, fields, None)

    def warning(self, event: str, /, **fields: Any) -> None:
        """Record a warning event."""
        self._emit("warning", event, fields, None)

    def error(self, event: str, /, traceback: str | None = None, **fields: Any) -> None:
        """Record an error; ``traceback`` goes to the file only."""
        self._emit("error", event, fields, traceback)

    def _emit(self, level: str, event: str, fields: dict[str, Any], traceback: str | None) -> None:
        getattr(self.logger, level)(event, **fields)
        if self.file is None:
            return
        record = {"time": self.clock.iso(), "level": level, "event": event, **self.bound, **fields}
        if traceback is not None:
            record["traceback"] = traceback
        try:
            self.file.append(record)
        except OSError as exc:
            self.logger.warning("instance_log_unwritable", path=str(self.file.path), error=str(exc))
