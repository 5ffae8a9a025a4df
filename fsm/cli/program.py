"""The ``fsm`` command: a thin shell over the Python API.

``main(argv) -> int`` parses arguments, calls the API and maps outcomes and errors to exit codes:
0 done, 1 internal error, 2 bad input, 3 event or command refused, 4 ended in a failure state,
5 stopped before a final state, 6 store error. Errors are one line on stderr; tracebacks never
reach the terminal (set ``FSM_DEBUG=1`` to see them), they are in the instance's log file.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from fsm.base.errors import FsmError
from fsm.cli.signals import exit_code_of_interrupt
from fsm.cli.table import COMMANDS
from fsm.view.terminal import one_line

__all__ = ["build_parser", "main"]


class _UsageError(Exception):
    """A command line argparse refuses: its message, and the command it was for."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse, whose refusals become fsm's one error line (see :func:`_usage_message`)
    instead of a usage block and argparse's own line."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def _common(parser: argparse.ArgumentParser, *, with_option: bool = True) -> None:
    """Global options, accepted before or after the command (SUPPRESS keeps the first value)."""
    group = parser.add_argument_group("global options")
    group.add_argument(
        "-C",
        "--workspace",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="workspace folder (default: the current directory)",
    )
    group.add_argument(
        "--log-format",
        choices=["console", "json"],
        default=argparse.SUPPRESS,
        help="log output on stderr (default: console)",
    )
    group.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default=argparse.SUPPRESS,
        help="least severe log event shown on stderr (default: warning; every event is kept "
        "in the instance's log file)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="show engine events on stderr: -v info, -vv debug",
    )
    flags = ["-o", "--option"] if with_option else ["--option"]
    group.add_argument(
        *flags,
        dest="options",
        action="append",
        default=argparse.SUPPRESS,
        metavar="KEY=VALUE",
        help="machine option for this command only (repeatable), e.g. -o test_command='pytest -x';"
        " VALUE is JSON when it parses; 'fsm options MACHINE' lists them",
    )


class _Version(argparse.Action):
    """``fsm --version``: the installed distribution's version, read only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            shown = version("fsm")
        except PackageNotFoundError:
            shown = "unknown (not installed as a distribution)"
        print(f"fsm {shown}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of every command, or of ``command`` only.

    Building one sub-parser instead of sixteen saves a few milliseconds of every start; it parses
    a command line that starts with that command exactly as the full parser does (only the
    top-level help, which lists every command, needs the full parser).
    """
    parser = _Parser(
        prog="fsm", description="Drive explicit finite-state machines (see README.md)."
    )
    _common(parser)
    parser.add_argument("--version", action=_Version, nargs=0, help="print fsm's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, declared in COMMANDS.items():
        if command is not None and name != command:
            continue
        p = sub.add_parser(name, help=declared.help, description=declared.help)
        _common(p, with_option=declared.short_option)
        declared.arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    word = _command_word(arguments)
    if word is not None and word not in COMMANDS:
        from fsm.model.definition import did_you_mean

        before = arguments[arguments.index(word) - 1] if arguments.index(word) else ""
        known = _option_strings(build_parser("machines"), None)
        if before.startswith("-") and before.split("=")[0] not in known:
            # `fsm --lgo-level x ls`: the mistyped option, not its value, is the problem.
            name = before.split("=")[0]
            suggestion = did_you_mean(name, known)
            _error(f"unknown option '{name}' of fsm{suggestion}; 'fsm --help' lists them")
            return 2
        _error(f"unknown command '{word}'{did_you_mean(word, COMMANDS)}; 'fsm --help' lists them")
        return 2
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (fsm completion)
        from fsm.cli.completion import complete_if_asked

        complete_if_asked(build_parser())
    first = arguments[0] if arguments else None
    parser = build_parser(first if first in COMMANDS else None)
    try:
        args = parser.parse_args(arguments)
    except _UsageError as exc:
        _error(_usage_message(parser, word, exc.message))
        return 2
    except SystemExit as exc:  # --help and --version exit 0
        return int(exc.code or 0)
    try:
        return _dispatch(args, vars(args))
    except FsmError as exc:
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        return exit_code_of_interrupt()
    except BrokenPipeError:
        return 0
    except OSError as exc:  # the file system refused: a store error, not a bug
        where = f": {exc.filename}" if exc.filename else ""
        _error(f"store error: {exc.strerror or exc}{where}")
        return 6
    except Exception as exc:
        if os.environ.get("FSM_DEBUG"):
            import traceback

            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc} (set FSM_DEBUG=1 for the traceback)")
        return 1


def _dispatch(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Configure logging as the global options say, then run the command named in ``args``."""
    from fsm.base.log import configure

    verbose = values.get("verbose", 0)
    level = values.get("log_level") or {0: "warning", 1: "info"}.get(verbose, "debug")
    configure(
        values.get("log_format", "console"),
        level,
        tracebacks=bool(verbose) or bool(os.environ.get("FSM_DEBUG")),
    )
    # Machine names include the workspace's own ([machines] in its fsm.toml).
    from fsm.model.discovery import use_workspace

    use_workspace(Path(values.get("workspace") or "."))
    try:
        return COMMANDS[args.command].handler(args, values)
    finally:
        use_workspace(None)  # main() called in-process again may work in another workspace
        from fsm.cli import command_values

        command_values.values_warned.clear()


_VALUED = frozenset({"-C", "--workspace", "--log-format", "--log-level", "-o", "--option"})
"""Global options that take a value (the word after them is not the command)."""


def _command_word(arguments: Sequence[str]) -> str | None:
    """The word in the command's place: the first argument that is neither a global option
    nor its value."""
    skip = False
    for argument in arguments:
        if skip:
            skip = False
        elif argument.startswith("-"):
            skip = argument in _VALUED
        else:
            return argument
    return None


def _usage_message(parser: argparse.ArgumentParser, command: str | None, message: str) -> str:
    """argparse's refusal in fsm's words: an unknown option gets the closest one of the
    command, anything else where the usage is."""
    from fsm.model.definition import did_you_mean

    where = f"fsm {command}" if command else "fsm"
    helping = f"'{where} --help' lists them"
    prefix = "unrecognized arguments: "
    if message.startswith(prefix):
        words = message.removeprefix(prefix).split()
        flags = [word for word in words if word.startswith("-") and len(word) > 1]
        if flags:
            name = flags[0].split("=")[0]
            known = _option_strings(parser, command)
            if name in known:  # an option of fsm itself (--version) given after the command
                return f"option '{name}' is fsm's own and goes before the command: 'fsm {name}'"
            return f"unknown option '{name}' of {where}{did_you_mean(name, known)}; {helping}"
        return f"unexpected argument '{words[0]}' of {where}; '{where} --help' shows its usage"
    needs = re.fullmatch(r"argument (\S+?)(?:/(\S+))?: expected one argument", message)
    if needs:
        flag = needs.group(2) or needs.group(1)
        return (
            f"option {flag} of {where} needs a value (a value that starts with '-' is written "
            f"{flag}=VALUE); '{where} --help' shows its usage"
        )
    return f"{message} ({where}); '{where} --help' shows its usage"


def _option_strings(parser: argparse.ArgumentParser, command: str | None) -> list[str]:
    """The long and short options of ``command`` (or of fsm itself), global ones included."""
    parsers = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            parsers.append(action.choices[command])
    return [flag for p in parsers for action in p._actions for flag in action.option_strings]


def _error(message: str) -> None:
    first = message.splitlines()[0] if message else "error"
    print(f"fsm: error: {one_line(first)}", file=sys.stderr)
