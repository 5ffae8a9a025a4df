"""The ``fsm`` command table: every command declared once, with its name, its help, its
arguments and the function that runs it.

:mod:`fsm.cli.program` builds the parser from this table (``fsm --help`` lists the commands in
its order) and calls the command's handler with the parsed arguments and their values. A new
command is one :class:`Command` here: its arguments function beside it, its handler in the
module of its kind (instance commands in :mod:`fsm.cli.commands`, machine commands in
:mod:`fsm.cli.machine_commands`, ...).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsm.cli import (
    agent_commands,
    commands,
    completion,
    machine_commands,
    store_commands,
    version_commands,
)

__all__ = ["COMMANDS", "Command"]

Handler = Callable[[argparse.Namespace, dict[str, Any]], int]
"""Runs a command: the parsed arguments and their values (the global options included) in, the
exit code out."""


@dataclass(frozen=True)
class Command:
    """One ``fsm`` command."""

    name: str
    help: str
    """One line for ``fsm --help`` and the command's own description."""
    arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the command's own arguments to its parser."""
    handler: Handler
    short_option: bool = True
    """Whether ``-o`` is the global ``--option`` (``fsm diagram`` keeps ``-o`` for its output)."""


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
    p.add_argument(
        "--coverage",
        metavar="REPORT",
        help="draw MACHINE with the edges a test suite took and those it did not (REPORT: "
        "written by pytest --fsm-cov-report=json:REPORT), e.g. -o cov.svg",
    )


def _coverage_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("machine", metavar="MACHINE", help="machine name or machine.yaml path")
    p.add_argument(
        "--journals",
        nargs="?",
        const="",
        metavar="WORKSPACE",
        help="count the edges real runs took, from the journals of the machine's instances in "
        "WORKSPACE's store (default: the -C workspace; its fsm.toml or FSM_STORE names the store)",
    )
    p.add_argument(
        "--tests",
        metavar="REPORT",
        help="join with a test report (pytest --fsm-cov-report=json:REPORT): list the edges "
        "real runs take that no test takes, and those neither takes",
    )
    p.add_argument("--json", action="store_true", help="print the counts as JSON")


def _test_paths_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("machine", metavar="MACHINE", help="machine name or machine.yaml path")
    p.add_argument(
        "--out",
        metavar="FILE",
        help="write the generated pytest module there (default: print it)",
    )
    p.add_argument(
        "--inputs",
        action="append",
        default=[],
        metavar="JSON",
        help="creation inputs to try, e.g. --inputs '{\"limit\": 0}' (repeatable; default: the "
        "defaults and one variant per field: an integer at its lower bound, a flag flipped)",
    )
    p.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="PATH=TEXT",
        help="a file written into the workspace before creating (repeatable)",
    )
    p.add_argument(
        "--agent-says",
        action="append",
        default=[],
        metavar="TEXT",
        help="an answer any agent may give (exit 0, TEXT on stdout), tried before the defaults "
        "(repeatable), e.g. --agent-says APPROVE",
    )
    p.add_argument(
        "--tests",
        metavar="REPORT",
        help="only the edges this test report (pytest --fsm-cov-report=json:REPORT) does not take",
    )
    p.add_argument("--seconds", type=float, default=60.0, help="search time (default: 60)")
    p.add_argument("--depth", type=int, default=30, help="moves per path at most (default: 30)")


def _completion_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete in")


def _init_arguments(p: argparse.ArgumentParser) -> None:
    """``fsm init`` takes no argument of its own (-C names the folder)."""


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
        "--queue",
        metavar="NAME",
        help="the queue of workers that run it, e.g. --queue gpu-hosts (default: the workspace's "
        "space, its folder's name; none for machines that need no workspace)",
    )
    p.add_argument(
        "--here",
        action="store_true",
        help="create it even where no project can be (the root folder or your home folder "
        "without an fsm.toml or .workflow, which fsm new otherwise refuses)",
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


def _replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "machine",
        help="machine name (e.g. ccw-loop; 'fsm machines' lists them) or machine.yaml path",
    )
    p.add_argument(
        "ids",
        nargs="*",
        metavar="ID",
        help="instance id ('fsm ls' lists them); with --decisions any number (default: all)",
    )
    p.add_argument(
        "--decisions",
        action="store_true",
        help="replay the journals' steps against a definition and report, per journal, the "
        "first step it would decide otherwise; then forecast the unfinished instances",
    )
    p.add_argument(
        "--definition",
        type=Path,
        metavar="PATH",
        help="the changed machine.yaml to replay against (default: the installed one)",
    )
    p.add_argument(
        "--journals",
        type=Path,
        metavar="DIR",
        help="replay the journals (*.ndjson) in DIR, fixtures exported with "
        "fsm.testing.export_journals, instead of the workspace's",
    )


def _migrate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("machine", help="machine name (e.g. ccw-loop) or machine.yaml path")
    p.add_argument(
        "id", nargs="?", help="instance id, as printed by 'fsm new' ('fsm ls' lists them)"
    )
    p.add_argument(
        "--all",
        action="store_true",
        dest="run_all",
        help="every instance of the machine that runs under an earlier version",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="show each migration (old and new state, the document's changes) without applying",
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
        "--reconfigure",
        action="store_true",
        help="adopt the workspace's options as they are now (fsm.toml, -o) for an instance that "
        "pinned those it started with, e.g. a changed test_command of a ccw-loop",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="show no progress on stderr (only the result line on stdout; --all shows none)",
    )
    p.add_argument(
        "--actor",
        default="run",
        help="who drives, kept in the journal and in the run's heartbeat, e.g. --actor serve "
        "(default: run; the runs of --all are run-all)",
    )


def _fire_arguments(p: argparse.ArgumentParser) -> None:
    _instance_arguments(p)
    p.add_argument("event", help="event name, e.g. approve ('fsm status' lists the allowed ones)")
    p.add_argument("--reason", help="why, kept in the journal, e.g. --reason 'tests are flaky'")
    p.add_argument(
        "--actor", default="cli", help="who, kept in the journal, e.g. --actor alice (default: cli)"
    )


def _command_arguments(p: argparse.ArgumentParser) -> None:
    _control_arguments(p)
    p.add_argument(
        "name",
        metavar="COMMAND",
        help="the machine's command, e.g. add_task ('fsm options MACHINE' lists its commands)",
    )
    p.add_argument(
        "--set",
        dest="values",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an input of the command (repeatable), e.g. --set description='Add --verbose'; "
        "VALUE is JSON when it parses",
    )


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
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds a connection has to send a request's headers, e.g. --header-timeout 30 "
        "(default: 10); slower ones are closed",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=64,
        metavar="N",
        help="connections one client address may hold, e.g. --max-connections 200 (default: "
        "64); one more closes its oldest connection still waiting for its headers",
    )
    p.add_argument(
        "--reads",
        choices=("private", "all", "none"),
        default="private",
        help="which reads need the token: private (default: instances whose document others "
        "may not read), all, or none",
    )
    p.add_argument(
        "--drive",
        action="store_true",
        help="drive the runnable instances (as fsm run --all would, each run in a process of "
        "its own): Start and Resume from the page then take effect with nothing else running",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="with --drive, drive N instances at a time, e.g. --workers 4 (default: 1; "
        "giving it implies --drive)",
    )


def _worker_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "machines",
        nargs="*",
        metavar="MACHINE",
        help="machines whose instances it runs, names or machine.yaml paths (default: every "
        "registered machine)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run N instances at a time in N processes, e.g. --jobs 4 (default: 1)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="K",
        help="drive K instances at a time in each process, on threads whose steps share the "
        "store's flushes, e.g. --concurrency 8 (default: 1)",
    )
    p.add_argument(
        "--queue",
        dest="queues",
        action="append",
        metavar="NAME",
        help="a queue it serves (repeatable), e.g. --queue gpu-hosts (default: the workspace's "
        "space); instances of machines that need no workspace are served by every worker",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        metavar="N",
        help="leave an instance after N steps of it (another worker, or this one later, "
        "continues it)",
    )
    p.add_argument(
        "--drain",
        action="store_true",
        help="exit once nothing is left to claim (exit 0 when all it ran completed, 4 when any "
        "failed, else 5) instead of waiting for more",
    )


def _store_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=["init", "import", "export", "adopt"],
        help="init: create or upgrade the store's tables (and give the workspace a space in "
        "fsm.toml when it has none); import: copy this workspace's files (documents and "
        "journals) into the store; export: write the store's instances back as those files; "
        "adopt: make the instances of this workspace's space that an older fsm made (their "
        "workspace unknown) this workspace's, so that workers run them",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="with import or export, replace instances whose copy there has work this side "
        "lacks (kept first: the store's in fsm_kept, the files' in the meta folder)",
    )
    p.add_argument(
        "machines",
        nargs="*",
        metavar="MACHINE",
        help="with import or export, only these machines' instances (default: every registered "
        "machine)",
    )


COMMANDS: dict[str, Command] = {
    command.name: command
    for command in [
        Command(
            "machines",
            "list the registered machines",
            _machines_arguments,
            machine_commands.cmd_machines,
        ),
        Command(
            "options",
            "a machine's options and creation inputs: type, default, help, where to set them",
            _options_arguments,
            machine_commands.cmd_options,
        ),
        Command(
            "schema",
            "the JSON Schema of a machine's document (or of its options)",
            _schema_arguments,
            machine_commands.cmd_schema,
        ),
        Command(
            "check",
            "static checks of machines (names or paths; default: all registered)",
            _check_arguments,
            machine_commands.cmd_check,
        ),
        Command(
            "diagram",
            "write machine diagrams, or one instance's diagram",
            _diagram_arguments,
            machine_commands.cmd_diagram,
            short_option=False,
        ),
        Command(
            "coverage",
            "which declared edges real runs took (--journals), and which of them no test takes "
            "(--tests REPORT)",
            _coverage_arguments,
            machine_commands.cmd_coverage,
        ),
        Command(
            "test-paths",
            "write, for each edge, the shortest scripted scenario that takes it, as pytest tests",
            _test_paths_arguments,
            machine_commands.cmd_test_paths,
        ),
        Command(
            "completion",
            "print the shell code for completing fsm commands, machines and instance ids: "
            'eval "$(fsm completion bash)" (or zsh) in the shell\'s start-up file',
            _completion_arguments,
            completion.cmd_completion,
        ),
        Command(
            "init",
            "write a commented fsm.toml in the workspace: every machine's options with their "
            "defaults, the workspace's own machines, the store",
            _init_arguments,
            machine_commands.cmd_init,
        ),
        Command(
            "new",
            "create an instance in its initial state and print its id",
            _new_arguments,
            commands.cmd_new,
        ),
        Command(
            "start",
            "control: start a created (or paused) instance",
            _control_arguments,
            commands.cmd_control,
        ),
        Command(
            "pause",
            "control: pause a running instance",
            _control_arguments,
            commands.cmd_control,
        ),
        Command(
            "resume",
            "control: resume a paused instance",
            _control_arguments,
            commands.cmd_control,
        ),
        Command(
            "stop",
            "control: stop an instance for good",
            _control_arguments,
            commands.cmd_control,
        ),
        Command(
            "run",
            "drive an instance (or with --all every runnable one) until a final state, a pause or "
            "stop, or the limit",
            _run_arguments,
            commands.cmd_run,
        ),
        Command(
            "worker",
            "claim runnable instances from the store and drive each to a stop, until SIGTERM: "
            "one line per instance driven",
            _worker_arguments,
            commands.cmd_worker,
        ),
        Command(
            "retry",
            "reopen an instance that ended failed, for its failed items (or the ones named); "
            "'fsm run' then runs them",
            _retry_arguments,
            commands.cmd_retry,
        ),
        Command(
            "step",
            "take one automatic step",
            _instance_arguments,
            commands.cmd_step,
        ),
        Command(
            "fire",
            "fire a named event",
            _fire_arguments,
            commands.cmd_fire,
        ),
        Command(
            "command",
            "run a command of the machine's own on an instance, e.g. ccw-loop's add_task",
            _command_arguments,
            commands.cmd_command,
        ),
        Command(
            "status",
            "state, status, progress and allowed events of an instance",
            _instance_json_arguments,
            commands.cmd_status,
        ),
        Command(
            "ls",
            "instances in the workspace, newest first",
            _ls_arguments,
            commands.cmd_ls,
        ),
        Command(
            "history",
            "the journal of an instance",
            _history_arguments,
            commands.cmd_history,
        ),
        Command(
            "replay",
            "check that the journal reproduces the document; with --decisions, whether a changed "
            "definition would have taken the steps the journals took",
            _replay_arguments,
            version_commands.cmd_replay,
        ),
        Command(
            "migrate",
            "move instances started under an earlier version of their machine to the installed "
            "one, as its machine file's migrations say (--dry-run shows them)",
            _migrate_arguments,
            version_commands.cmd_migrate,
        ),
        Command(
            "recover",
            "rebuild a corrupt document where the machine supports it",
            _instance_arguments,
            commands.cmd_recover,
        ),
        Command(
            "store",
            "the store's tables (init) and copies between the workspace's files and the store "
            "(import, export)",
            _store_arguments,
            store_commands.cmd_store,
        ),
        Command(
            "agents",
            "the agent CLIs fsm knows and fsm.toml configures: where, which version, and whether "
            "each accepts fsm's invocation (checked offline); exit 1 when one cannot run",
            _agents_arguments,
            agent_commands.cmd_agents,
        ),
        Command(
            "serve",
            "a live web view of the workspace's machines and instances",
            _serve_arguments,
            commands.cmd_serve,
        ),
    ]
}
"""Every command, in the order ``fsm --help`` lists them."""
