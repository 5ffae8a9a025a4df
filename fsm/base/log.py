"""Structured logging: configuration for the edge, and the engine's per-instance event log.

Library code takes a structlog logger and never configures anything; the command line (or an
orchestrator script) calls :func:`configure` once. Every instance also keeps a JSON-lines log
file beside its journal; :class:`EventLog` sends each event to both, and keeps tracebacks out of
the terminal: they go to the file only.

structlog itself (~40 ms of the start-up of ``fsm status``, asyncio included) is imported
only when something is logged: :func:`get_logger` hands out a :class:`LazyLogger`, and
:func:`configure` applies its settings at once when structlog is already imported, or else on
the first event fsm logs (or when a loaded machine module imported structlog itself).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Protocol, TextIO

from fsm.base.clock import Clock

__all__ = [
    "EventLog",
    "LazyLogger",
    "LineSink",
    "apply_pending_configuration",
    "configure",
    "get_logger",
]

LogFormat = Literal["console", "json"]
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
_pending: list[tuple[LogFormat, str, TextIO]] = []
"""The settings of a :func:`configure` call not applied yet (structlog not imported then)."""
_traceback_stream: list[TextIO] = []
"""Where :class:`EventLog` also writes the tracebacks it records, when :func:`configure` was
asked to show them (empty: tracebacks go to the instance's log file only)."""


def configure(
    fmt: LogFormat = "console",
    level: str = "info",
    stream: TextIO | None = None,
    *,
    tracebacks: bool = False,
) -> None:
    """Configure structlog for a process: JSON lines or readable console lines on ``stream``.

    ``tracebacks`` (``FSM_DEBUG=1`` or ``-v`` on the command line) also writes the traceback of
    every error an instance records (a failing action, a failing hook) to ``stream``, after its
    event: the way to see why an action failed without opening the instance's log file.
    """
    _pending[:] = [(fmt, level, stream or sys.stderr)]
    _traceback_stream[:] = [stream or sys.stderr] if tracebacks else []
    if "structlog" in sys.modules:
        apply_pending_configuration()


def apply_pending_configuration() -> None:
    """Apply the settings of the last :func:`configure` call if structlog is imported by now."""
    if not _pending or "structlog" not in sys.modules:
        return
    fmt, level, stream = _pending.pop()
    structlog = _structlog()
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
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


def _structlog() -> ModuleType:
    import structlog

    return structlog


def _no_traceback(stream: TextIO, exc_info: Any) -> None:
    """Console output never shows tracebacks; they are in the instance log file."""


class LazyLogger:
    """A structlog logger bound with context values, created (and structlog imported) on first use.

    ``bind`` stays lazy; any other attribute (``info``, ``warning``, ``new``...) is the real
    bound logger's, built with the structlog configuration current at that first use.
    """

    __slots__ = ("_bound", "_logger", "_name")

    def __init__(self, name: str | None = None, **bound: Any) -> None:
        self._name = name
        self._bound = bound
        self._logger: Any = None

    def bind(self, **values: Any) -> LazyLogger:
        """A logger with more context values."""
        return LazyLogger(self._name, **{**self._bound, **values})

    def resolve(self) -> Any:
        """The real structlog bound logger; one that drops every event when nobody configured
        logging (fsm used as a library prints nothing unless asked: structlog's default would
        print to stdout)."""
        if self._logger is None:
            structlog = _structlog()
            apply_pending_configuration()
            if not structlog.is_configured():
                self._logger = _Silent()
                return self._logger
            logger = structlog.get_logger(self._name) if self._name else structlog.get_logger()
            self._logger = logger.bind(**self._bound)
        return self._logger

    def __getattr__(self, name: str) -> Any:
        return getattr(self.resolve(), name)


class _Silent:
    """A logger that drops everything (see :meth:`LazyLogger.resolve`)."""

    def bind(self, **values: Any) -> _Silent:
        return self

    def __getattr__(self, name: str) -> Any:
        return _drop


def _drop(*args: Any, **kwargs: Any) -> None:
    """Drop one event."""


def get_logger(name: str | None = None, **bound: Any) -> LazyLogger:
    """A :class:`LazyLogger` named ``name``, bound with ``bound``."""
    return LazyLogger(name, **bound)


class LineSink(Protocol):
    """Where an :class:`EventLog` writes its lines: an instance's log file
    (:class:`fsm.store.journal.LineLog`)."""

    path: Path

    def append(self, record: Mapping[str, Any]) -> int:
        """Append ``record`` as one JSON line."""
        ...


class EventLog:
    """One event, two sinks: the structlog logger and the instance's JSON-lines file."""

    def __init__(self, logger: Any, file: LineSink | None, clock: Clock, **bound: Any) -> None:
        self.logger = logger.bind(**bound) if bound else logger
        self.file = file
        self.clock = clock
        self.bound = bound

    def info(self, event: str, /, **fields: Any) -> None:
        """Record an informational event."""
        self._emit("info", event, fields, None)

    def warning(self, event: str, /, **fields: Any) -> None:
        """Record a warning event."""
        self._emit("warning", event, fields, None)

    def error(self, event: str, /, traceback: str | None = None, **fields: Any) -> None:
        """Record an error; ``traceback`` goes to the file only."""
        self._emit("error", event, fields, traceback)

    def step_failed(self, event: str, /, traceback: str | None = None, **fields: Any) -> None:
        """Record a failed step: an error in the instance's log file, but an info event for the
        structlog logger (on stderr with ``-v``), because the step's result carries the failure
        and whoever drove the step reports it in one line of its own (``fsm run``'s result)."""
        self._emit("error", event, fields, traceback, shown="info")

    def _emit(
        self,
        level: str,
        event: str,
        fields: dict[str, Any],
        traceback: str | None,
        shown: str | None = None,
    ) -> None:
        logger = self.logger
        if type(logger) is LazyLogger:
            logger = self.logger = logger.resolve()
        getattr(logger, shown or level)(event, **fields)
        if traceback is not None and _traceback_stream:
            _traceback_stream[0].write(traceback if traceback.endswith("\n") else traceback + "\n")
        if self.file is None:
            return
        record = {"time": self.clock.iso(), "level": level, "event": event, **self.bound, **fields}
        if traceback is not None:
            record["traceback"] = traceback
        try:
            self.file.append(record)
        except (OSError, ValueError) as exc:
            self.logger.warning("instance_log_unwritable", path=str(self.file.path), error=str(exc))
