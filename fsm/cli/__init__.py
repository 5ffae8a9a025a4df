"""The ``fsm`` command: its command table, the handlers, and ``fsm run --all``. Thin: it parses
arguments, calls the layers below, and maps errors to exit codes.

:func:`main` (:mod:`fsm.cli.program`) is the command's entry point, also for running it in-process.
"""

from fsm.cli.program import main, main_entry

__all__ = ["main", "main_entry"]
