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
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from fsm import commands
from fsm.errors import FsmError
from fsm.terminal import one_line

__all__ = ["build_parser", "main", "main_entry"]


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


def _instance_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "machine",
        help="machine name (e.g. ccw-loop; 'fsm machines' lists them) or machine.yaml path",
    )
    p.add_argument("id", help="instance id, as printed by 'fsm new' ('fsm ls' lists them)")


def _machines_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _options_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("machine", help="machine name or machine.yaml path, e.g. ccw-loop")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _schema_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("machine", help="machine name or machine.yaml path, e.g. ccw-loop")
    p.add_argument(
        "--options", action="store_true", help="the schema of the options instead of the document"
    )


def _check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="machine names or machine.yaml paths, e.g. ccw-loop ./my/machine.yaml "
        "(default: every registered machine)",
    )


def _diagram_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "machines",
        nargs="*",
        metavar="MACHINE",
        help="machine names or paths (default: every registered machine)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR_OR_FILE",
        help="output folder (default: diagrams), or with --run the file, e.g. -o run.svg",
    )
    p.add_argument(
        "-f",
        "--formats",
        default="dot,svg,png,mmd",
        help="comma-separated formats, e.g. -f svg,mmd (default: dot,svg,png,mmd)",
    )
    p.add_argument(
        "--run", metavar="ID", help="draw this instance of MACHINE with its visit counts"
    )


def _new_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("machine", help="machine name or machine.yaml path, e.g. ccw-loop")
    p.add_argument(
        "--id",
        dest="instance_id",
        help="instance id, e.g. --id fix-parser (default: generated from the machine and time)",
    )
    p.add_argument(
        "--set",
        dest="values",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a creation input (repeatable), e.g. --set title='Fix the parser' --set "
        "max_iterations=5; KEY may be dotted (target_skill.path=my-skill), VALUE is JSON when it "
        "parses; 'fsm options MACHINE' lists the inputs",
    )
    p.add_argument(
        "--input",
        type=Path,
        metavar="FILE.json",
        help="creation inputs as a JSON object, e.g. --input loop.json, or - for standard input "
        "(--set values win)",
    )


def _control_arguments(p: argparse.ArgumentParser) -> None:
    _instance_arguments(p)
    p.add_argument("--reason", help="why, kept in the journal, e.g. --reason 'lunch break'")
    p.add_argument(
        "--actor", default="cli", help="who, kept in the journal, e.g. --actor alice (default: cli)"
    )


def _retry_arguments(p: argparse.ArgumentParser) -> None:
    _control_arguments(p)
    p.add_argument(
        "items",
        nargs="*",
        metavar="ITEM",
        help="what to retry, in the machine's words, e.g. ISS-2 ISS-3 for issue-manager "
        "(default: everything that failed)",
    )


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "machine",
        nargs="?",
        help="machine name (e.g. ccw-loop; 'fsm machines' lists them) or machine.yaml path; "
        "with --all, only this machine's instances (default: every machine's)",
    )
    p.add_argument(
        "id", nargs="?", help="instance id, as printed by 'fsm new' ('fsm ls' lists them)"
    )
    p.add_argument(
        "--all",
        action="store_true",
        dest="run_all",
        help="run every runnable instance of the workspace (created or running; not paused, "
        "not ended), one line each; exit 0 when all completed, 4 when any failed, else 5",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="with --all, run N instances at a time in N processes, e.g. --jobs 4 (default: 1)",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        metavar="N",
        help="stop after N steps (exit 5), e.g. --max-steps 20 (default: no limit but the "
        "machine's own); with --all, for each instance",
    )
    p.add_argument(
        "--interactive",
        action="store_true",
        help="offer a menu of the allowed events when the machine waits for a person",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="show no progress on stderr (only the result line on stdout; --all shows none)",
    )


def _fire_arguments(p: argparse.ArgumentParser) -> None:
    _instance_arguments(p)
    p.add_argument("event", help="event name, e.g. approve ('fsm status' lists the allowed ones)")


def _instance_json_arguments(p: argparse.ArgumentParser) -> None:
    _instance_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def _history_arguments(p: argparse.ArgumentParser) -> None:
    _instance_json_arguments(p)
    p.add_argument(
        "--tail",
        type=int,
        metavar="N",
        help="only the last N records, read from the end of the journal, e.g. --tail 20",
    )
    p.add_argument(
        "--changes",
        action="store_true",
        help="under each record, the document's fields it changed (+ added, - removed, "
        "~ replaced, with the new value)",
    )


def _ls_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "machine", nargs="?", help="only this machine's instances (default: every machine)"
    )
    p.add_argument(
        "--status",
        dest="status_filter",
        metavar="S",
        help="only instances with this control status, e.g. --status running",
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def _agents_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="agents to check, e.g. codex (default: every known CLI and every [agent.NAME] of "
        "fsm.toml)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "machines",
        nargs="*",
        metavar="MACHINE",
        help="machines to show, names or machine.yaml paths, e.g. examples/counter/machine.yaml "
        "(default: every registered machine)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1); any but loopback needs --allow-remote",
    )
    p.add_argument(
        "--port", type=int, default=8765, help="port, e.g. --port 9000 (default: 8765; 0: any free)"
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --host be an address other machines reach (every request then needs the token)",
    )
    p.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="read the token from FILE, readable by you only (default: a new token per start)",
    )
    p.add_argument(
        "--max-body",
        type=int,
        default=1024 * 1024,
        metavar="BYTES",
        help="largest request body taken, e.g. --max-body 4194304 (default: 1 MiB); larger "
        "ones are refused (413) unread",
    )
    p.add_argument(
        "--reads",
        choices=("private", "all", "none"),
        default="private",
        help="which reads need the token: private (default: instances whose document others "
        "may not read), all, or none",
    )


_Arguments = Callable[[argparse.ArgumentParser], None]

_COMMANDS: dict[str, tuple[str, _Arguments]] = {
    "machines": ("list the registered machines", _machines_arguments),
    "options": (
        "a machine's options and creation inputs: type, default, help, where to set them",
        _options_arguments,
    ),
    "schema": ("the JSON Schema of a machine's document (or of its options)", _schema_arguments),
    "check": (
        "static checks of machines (names or paths; default: all registered)",
        _check_arguments,
    ),
    "diagram": ("write machine diagrams, or one instance's diagram", _diagram_arguments),
    "new": ("create an instance in its initial state and print its id", _new_arguments),
    "start": ("control: start a created (or paused) instance", _control_arguments),
    "pause": ("control: pause a running instance", _control_arguments),
    "resume": ("control: resume a paused instance", _control_arguments),
    "stop": ("control: stop an instance for good", _control_arguments),
    "run": (
        "drive an instance (or with --all every runnable one) until a final state, a pause or "
        "stop, or the limit",
        _run_arguments,
    ),
    "retry": (
        "reopen an instance that ended failed, for its failed items (or the ones named); "
        "'fsm run' then runs them",
        _retry_arguments,
    ),
    "step": ("take one automatic step", _instance_arguments),
    "fire": ("fire a named event", _fire_arguments),
    "status": (
        "state, status, progress and allowed events of an instance",
        _instance_json_arguments,
    ),
    "ls": ("instances in the workspace, newest first", _ls_arguments),
    "history": ("the journal of an instance", _history_arguments),
    "replay": ("check that the journal reproduces the document", _instance_arguments),
    "recover": ("rebuild a corrupt document where the machine supports it", _instance_arguments),
    "agents": (
        "the agent CLIs fsm knows and fsm.toml configures: where, which version, and whether "
        "each accepts fsm's invocation (checked offline); exit 1 when one cannot run",
        _agents_arguments,
    ),
    "serve": ("a live web view of the workspace's machines and instances", _serve_arguments),
}
"""Every command: its help text and the function adding its arguments, in help order."""


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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help_text, arguments) in _COMMANDS.items():
        if command is not None and name != command:
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        _common(p, with_option=name != "diagram")
        arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    word = _command_word(arguments)
    if word is not None and word not in _COMMANDS:
        from fsm.definition import did_you_mean

        before = arguments[arguments.index(word) - 1] if arguments.index(word) else ""
        known = _option_strings(build_parser("machines"), None)
        if before.startswith("-") and before.split("=")[0] not in known:
            # `fsm --lgo-level x ls`: the mistyped option, not its value, is the problem.
            name = before.split("=")[0]
            suggestion = did_you_mean(name, known)
            _error(f"unknown option '{name}' of fsm{suggestion}; 'fsm --help' lists them")
            return 2
        _error(f"unknown command '{word}'{did_you_mean(word, _COMMANDS)}; 'fsm --help' lists them")
        return 2
    first = arguments[0] if arguments else None
    parser = build_parser(first if first in _COMMANDS else None)
    try:
        args = parser.parse_args(arguments)
    except _UsageError as exc:
        _error(_usage_message(parser, word, exc.message))
        return 2
    except SystemExit as exc:  # --help and --version exit 0
        return int(exc.code or 0)
    try:
        return commands.dispatch(args, vars(args))
    except FsmError as exc:
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
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
    from fsm.definition import did_you_mean

    where = f"fsm {command}" if command else "fsm"
    helping = f"'{where} --help' lists them"
    prefix = "unrecognized arguments: "
    if message.startswith(prefix):
        words = message.removeprefix(prefix).split()
        flags = [word for word in words if word.startswith("-") and len(word) > 1]
        if flags:
            name = flags[0].split("=")[0]
            known = _option_strings(parser, command)
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


def main_entry() -> None:
    """Console-script entry point; SIGTERM interrupts like Ctrl-C, so a step in progress is
    abandoned (its commands' process groups killed, its document untouched) and locks released."""
    signal.signal(signal.SIGTERM, _interrupt)
    sys.exit(main())


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
