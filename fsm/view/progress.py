"""What ``fsm run`` shows while it runs, on stderr (stdout keeps only the result line).

On a terminal: one line, redrawn in place after every step (the step, state and last event and the
elapsed time first, so that a narrow terminal still shows them; then the machine's summary such as
``iteration 3/10`` or the last test result, and the machine and instance), drawn by `rich
<https://rich.readthedocs.io>`_ and left on screen when the run ends. Elsewhere (a CI log, a pipe):
plain lines, one for each of the first :data:`FIRST_STEPS` steps, then at most one every
:data:`INTERVAL` seconds, and always one for a failed step and for the run's last step, so that a
run of 20,000 quick steps writes a few dozen lines and a log still ends with where the run stopped.
``--quiet`` shows neither.

A step whose action takes long (an agent, a test suite) is not silence: from the run's own
heartbeat (:mod:`fsm.store.heartbeat`), the live line shows the action and its age as it grows,
and elsewhere a line ``... action develop running for 30 s`` is written every :data:`WAITING`
seconds while no step ends.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from fsm.view.terminal import one_line

if TYPE_CHECKING:
    from fsm.engine.instance import Instance
    from fsm.model.outcome import StepResult

__all__ = ["FIRST_STEPS", "INTERVAL", "WAITING", "RunProgress"]

FIRST_STEPS = 10
"""Steps shown one line each at the start of a run on a non-terminal."""
INTERVAL = 5.0
"""Seconds between two progress lines on a non-terminal after the first steps."""

WAITING = 30.0
"""Seconds without a step after which a non-terminal gets a line naming the action in progress
(and again every as many seconds)."""
_LOOK = 1.0
"""Seconds between two looks at the run's heartbeat while a step runs."""

_SUMMARY_KEYS = 4
"""Summary entries shown on the live line (the first ones the machine's summary hook gives)."""


class RunProgress:
    """Receives each step of a run (``Engine.run(on_step=...)``) and shows it."""

    def __init__(
        self,
        instance: Instance,
        stream: IO[str],
        *,
        live: bool,
        clock: Callable[[], float] = time.monotonic,
        watch: bool = True,
    ) -> None:
        self.instance = instance
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.steps = 0
        self._live: Any = None
        self._last_written = self.started
        self._quiet_since = time.monotonic()
        """When the last line (or step) was shown, by the real clock (the watcher's)."""
        self._line = ""
        """The live line's head for the last step (``step 3 | develop (next)``): with the
        elapsed time (or the action in progress and its age), it comes first, so that a narrow
        terminal, which cuts the line's end, still shows them."""
        self._rest: list[str] = []
        """What follows on the live line, as room allows: a failure, the summary, who runs."""
        self._unwritten: str | None = None
        """The line of the last step when it was not written (written by :meth:`close`)."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        if live:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=stream, highlight=False, soft_wrap=False)
            self._live = Live("", console=console, auto_refresh=False, transient=False)
            self._live.start()
        if watch:
            self._watcher = threading.Thread(target=self._watch, name="fsm-progress", daemon=True)
            self._watcher.start()

    def __call__(self, result: StepResult) -> None:
        """Show one step."""
        with self._lock:
            self._show(result)

    def _show(self, result: StepResult) -> None:
        self.steps += 1
        now = self.clock()
        self._quiet_since = time.monotonic()
        elapsed = now - self.started
        what = f"{result.source} -> {result.state}" if result.source else result.state
        event = f" ({result.event})" if result.event else ""
        failed = f"; failed: {result.error}" if result.outcome == "failed" and result.error else ""
        summary = self._summary()
        if self._live is not None:
            from rich.text import Text

            self._line = f"step {self.steps} | {result.state}{event}"
            self._rest = [failed.removeprefix("; "), summary, self._who()]
            line = _joined(f"{self._line} | {_clock(elapsed)}", self._rest)
            self._live.update(Text(one_line(line), overflow="ellipsis", no_wrap=True))
            self._live.refresh()
            return
        line = f"step {self.steps}: {what}{event} [{elapsed:.1f}s]"
        if summary:
            line += f" {summary}"
        line = one_line(line + failed)
        due = self.steps <= FIRST_STEPS or now - self._last_written >= INTERVAL
        if due or failed:
            self._write(line)
            self._last_written = now
        else:
            self._unwritten = line

    def _watch(self) -> None:
        """While a step runs, show the action in progress (from the run's heartbeat)."""
        from fsm.store.heartbeat import heartbeats_of

        while not self._stop.wait(_LOOK):
            try:
                beat = heartbeats_of(self.instance.store).read(self.instance.id)
            except Exception:  # progress is decoration: never let it break a run
                continue
            if beat is None or beat.pid != os.getpid() or beat.action is None:
                continue
            age = max(0.0, time.time() - (beat.action_started or time.time()))
            with self._lock:
                self._waiting(beat.action, beat.state, age)

    def _waiting(self, action: str, state: str | None, age: float) -> None:
        if self._live is not None:
            from rich.text import Text

            head = self._line or f"step {self.steps + 1} | {state or '?'}"
            line = _joined(f"{head} | {action} for {_clock(age)}", self._rest or [self._who()])
            self._live.update(Text(one_line(line), overflow="ellipsis", no_wrap=True))
            self._live.refresh()
            return
        now = time.monotonic()
        if now - self._quiet_since >= WAITING:
            where = f" in state '{state}'" if state else ""
            line = f"step {self.steps + 1}: action {action} running for {age:.0f}s{where}"
            self._write(one_line(line), keep=True)
            self._quiet_since = now

    def close(self) -> None:
        """Stop redrawing (the last line stays on screen); elsewhere write the last step's
        line if it was not written yet."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._unwritten is not None:
            self._write(self._unwritten)

    def _write(self, line: str, *, keep: bool = False) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        if not keep:  # a line about the action in progress leaves the step's line to write
            self._unwritten = None

    def _who(self) -> str:
        return f"{self.instance.machine.name} {self.instance.id}"

    def _summary(self) -> str:
        """The first entries of the machine's summary of the document, as ``key value`` pairs."""
        hook = self.instance.machine.hooks.summary
        if hook is None:
            return ""
        try:
            lines = hook(self.instance.peek().doc)
        except Exception:  # a summary is decoration: never let it break a run
            return ""
        shown = list(lines.items())[:_SUMMARY_KEYS]
        return "; ".join(f"{key} {value}" for key, value in shown)


def _joined(head: str, rest: list[str]) -> str:
    """``head | a | b``, leaving out the empty parts."""
    return " | ".join([head, *(part for part in rest if part)])


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes:02d}:{rest:02d}"
