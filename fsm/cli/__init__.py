"""The ``fsm`` command: its command table, the handlers, and ``fsm run --all``. Thin: it parses
arguments, calls the layers below, and maps errors to exit codes.

:func:`main` (:mod:`fsm.cli.program`) is the command's entry point, also for running it in-process;
:func:`main_entry` is the console script's, which catches signals before anything heavy is
imported (:mod:`fsm.cli.signals`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from fsm.cli.signals import catch_signals, exit_code_of_interrupt

if TYPE_CHECKING:
    from fsm.cli.program import main

__all__ = ["main", "main_entry"]


def main_entry() -> None:
    """Console-script entry point: signals first, then the command line (see
    :mod:`fsm.cli.signals`); an interrupt during start-up is one line, as later."""
    catch_signals()
    try:
        from fsm.cli.program import main

        code = main()
    except KeyboardInterrupt:
        print("fsm: error: interrupted", file=sys.stderr)
        code = exit_code_of_interrupt()
    sys.exit(code)


def __getattr__(name: str) -> Any:
    """``main`` is imported when it is used, not when the console script starts."""
    if name == "main":
        from fsm.cli.program import main

        return main
    raise AttributeError(f"module 'fsm.cli' has no attribute {name!r}")
