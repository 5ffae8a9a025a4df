"""What ``fsm run`` shows while it runs, on stderr (stdout keeps only the result line).

On a terminal: one line, redrawn in place after every step (machine, instance, state, the
machine's summary such as ``iteration 3/10`` or the last test result, the last event and the
elapsed time), drawn by `rich <https://rich.readthedocs.io>`_ and left on screen when the run
ends. Elsewhere (a CI log, a pipe): one plain line per step. ``--quiet`` shows neither.
"""

from __future__ import annotations

import time
from typing import IO, TYPE_CHECKING, Any

from fsm.terminal import one_line

if TYPE_CHECKING:
    from fsm.instance import Instance
    from fsm.outcome import StepResult

__all__ = ["RunProgress"]

_SUMMARY_KEYS = 4
"""Summary entries shown on the live line (the first ones the machine's summary hook gives)."""


class RunProgress:
    """Receives each step of a run (``Engine.run(on_step=...)``) and shows it."""

    def __init__(self, instance: Instance, stream: IO[str], *, live: bool) -> None:
        self.instance = instance
        self.stream = stream
        self.started = time.monotonic()
        self.steps = 0
        self._live: Any = None
        if live:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=stream, highlight=False, soft_wrap=False)
            self._live = Live("", console=console, auto_refresh=False, transient=False)
            self._live.start()

    def __call__(self, result: StepResult) -> None:
        """Show one step."""
        self.steps += 1
        elapsed = time.monotonic() - self.started
        what = f"{result.source} -> {result.state}" if result.source else result.state
        event = f" ({result.event})" if result.event else ""
        failed = f"; failed: {result.error}" if result.outcome == "failed" and result.error else ""
        summary = self._summary()
        if self._live is not None:
            from rich.text import Text

            line = (
                f"{self.instance.machine.name} {self.instance.id} | step {self.steps} | "
                f"{result.state}{event} | {summary} | {_clock(elapsed)}{failed}"
            )
            self._live.update(Text(one_line(line), overflow="ellipsis", no_wrap=True))
            self._live.refresh()
            return
        line = f"step {self.steps}: {what}{event} [{elapsed:.1f}s]"
        if summary:
            line += f" {summary}"
        self.stream.write(one_line(line + failed) + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Stop redrawing (the last line stays on screen)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

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


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes:02d}:{rest:02d}"
