"""The implementation of each ``fsm`` command over the Python API.

Heavy modules (the engine and its ``transitions`` kernel, Graphviz) are imported inside the
commands that need them, so that ``fsm status`` and ``fsm ls`` start quickly.
"""

from __future__ import annotations

import argparse
import itertools
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.base import jsonio
from fsm.base.errors import DocumentInputError, InputError
from fsm.cli.command_values import instance_from, workspace_from
from fsm.view.terminal import emit_json, json_text, one_line, out

if TYPE_CHECKING:
    from fsm.engine.driving import Driven
    from fsm.engine.instance import Instance

__all__ = [
    "cmd_command",
    "cmd_control",
    "cmd_fire",
    "cmd_history",
    "cmd_ls",
    "cmd_new",
    "cmd_recover",
    "cmd_retry",
    "cmd_run",
    "cmd_serve",
    "cmd_status",
    "cmd_step",
]


_workspace = workspace_from


def cmd_new(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Create an instance."""
    if not args.here:
        _refuse_non_project(Path(values.get("workspace", ".")))
    workspace = _workspace(values)
    machine = workspace.machine(args.machine)
    inputs: dict[str, Any] = {}
    if args.input is not None:
        try:
            if str(args.input) == "-":  # standard input, as much of it as the limit allows
                inputs = jsonio.loads(sys.stdin.buffer.read(jsonio.MAX_BYTES + 1))
            else:
                inputs = jsonio.load_file(args.input)
        except OSError as exc:
            raise DocumentInputError(f"cannot read {args.input}: {exc}") from exc
        except jsonio.JsonError as exc:
            if str(exc).startswith("larger than"):  # too big to be a document's inputs
                from fsm.base.errors import InputTooLargeError

                raise InputTooLargeError(f"{args.input} is {exc}: nothing was created") from exc
            raise DocumentInputError(f"{args.input} is not valid JSON: {exc}") from exc
        if not isinstance(inputs, dict):
            raise DocumentInputError(f"{args.input} must hold a JSON object")
    from fsm.model.inputs import parse_set_values

    _merge(inputs, parse_set_values(machine, args.values))
    # An empty --id is a mistake to report, not a request for a generated id.
    instance_id = workspace.new_id(machine) if args.instance_id is None else args.instance_id
    workspace.instance(machine, instance_id).create(inputs, queue=args.queue)
    out(instance_id)
    return 0


def _refuse_non_project(folder: Path) -> None:
    """``fsm new`` in ``/`` or the home folder (or a folder above it), where no fsm.toml or
    ``.workflow`` says a project is, is almost always a shell in the wrong folder: refuse it, and
    say how to do what was meant."""
    try:
        here = folder.resolve()
        home = Path.home().resolve()
    except (OSError, RuntimeError):
        return
    if here != Path(here.anchor) and here != home and here not in home.parents:
        return
    if (here / "fsm.toml").exists() or (here / ".workflow").exists():
        return
    what = "your home folder" if here == home else "a folder above your home folder"
    if here == Path(here.anchor):
        what = "the root folder"
    raise InputError(
        f"{here} is {what}, not a project (no fsm.toml or .workflow): cd into the project, "
        "give -C PROJECT, or run 'fsm init' here first ('fsm new --here' creates it anyway)"
    )


def _merge(target: dict[str, Any], overlay: dict[str, Any]) -> None:
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def cmd_control(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """start / pause / resume / stop."""
    from fsm.engine.control import ControlPlane

    instance = instance_from(args, values)
    saved = ControlPlane(instance).apply(args.command, actor=args.actor, reason=args.reason)
    out(f"{instance.id}: {saved.status} ({saved.state})")
    return 0


def cmd_run(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Drive an instance, showing each step on stderr (see :mod:`fsm.view.progress`); with ``--all``
    drive every runnable instance (see :mod:`fsm.cli.fleet`)."""
    if args.max_steps is not None and args.max_steps < 0:
        raise InputError("--max-steps must be 0 or more")
    if args.run_all:
        if args.actor != "run":
            raise InputError("--actor goes with one instance (the runs of --all are run-all)")
        if args.reconfigure:
            raise InputError("--reconfigure goes with one instance (name the one to reconfigure)")
        return _run_all(args, values)
    if args.machine is None or args.id is None:
        raise InputError("fsm run needs MACHINE and ID (or --all to run every runnable instance)")
    if args.jobs != 1:
        raise InputError("--jobs goes with --all (one instance runs in one process)")
    from fsm.engine.engine import Engine
    from fsm.view.progress import RunProgress

    instance = instance_from(args, values)
    engine = Engine(instance, interactive=args.interactive, reconfigure=args.reconfigure)
    chooser = _menu if args.interactive else None
    progress = None
    # JSON logs are for programs: their transition events say what progress lines would.
    if not args.quiet and values.get("log_format") != "json":
        live = sys.stderr.isatty() and not args.interactive  # a menu needs the plain lines
        progress = RunProgress(instance, sys.stderr, live=live)
    try:
        result = engine.run(
            max_steps=args.max_steps, chooser=chooser, actor=args.actor, on_step=progress
        )
    finally:
        if progress is not None:
            progress.close()
    steps = len(result.steps)
    line = f"{instance.id}: {result.outcome} in state '{result.state}' after {steps} steps"
    # The result line is the run's one line, an error included (exit 1): the failure is not
    # repeated on stderr, and the engine's event is in the instance's log (on stderr with -v).
    out(one_line(f"{line}: {result.message}" if result.message else line))
    return result.exit_code


def cmd_worker(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """``fsm worker``: claim and drive instances until SIGTERM (see :mod:`fsm.worker`): a line
    per instance as it ends, totals on stderr; exit 0 when told to stop, the fleet's exit code
    with ``--drain``."""
    from fsm.cli.fleet import exit_code
    from fsm.engine.worker import MAX_CONCURRENCY, WorkerOptions, work
    from fsm.model.discovery import open_machine, registered_machines

    if args.jobs < 1:
        raise InputError("--jobs must be 1 or more")
    if not 1 <= args.concurrency <= MAX_CONCURRENCY:
        raise InputError(f"--concurrency must be between 1 and {MAX_CONCURRENCY}")
    if args.max_steps is not None and args.max_steps < 1:
        raise InputError("--max-steps must be 1 or more")
    workspace = _workspace(values)
    names = args.machines or sorted(registered_machines())
    machines = [open_machine(name) for name in names]
    for queue in args.queues or ():
        if not queue or "/" in queue:
            raise InputError(f"--queue '{queue}' is not a queue name")

    options = WorkerOptions(
        args.queues,
        jobs=args.jobs,
        concurrency=args.concurrency,
        max_steps=args.max_steps,
        drain=args.drain,
    )
    results = work(workspace, machines, options, _show_driven)
    # An instance driven more than once (paused, then resumed and claimed again) is counted
    # once, by how its last run ended: the totals are instances, as fsm run --all's are.
    last = {(result.machine, result.id): result for result in results}
    shown = _totals(list(last.values()))
    runs = f" in {len(results)} runs" if len(results) != len(last) else ""
    print(f"fsm: worker drove {len(last)} instances{runs}: {shown or 'none'}", file=sys.stderr)
    return exit_code(list(last.values())) if args.drain else 0


def cmd_retry(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Reopen a failed instance (see :mod:`fsm.engine.retry`); print what was reopened and what
    next."""
    from fsm.engine.retry import retry

    instance = instance_from(args, values)
    report = retry(instance, args.items, actor=args.actor, reason=args.reason)
    reopened = ", ".join(report.items) or "nothing named"
    status = f", status {report.status}" if report.status is not None else ""
    out(
        one_line(
            f"{instance.id}: reopened {reopened} (state '{report.state}'{status}); "
            f"'fsm run {args.machine} {instance.id}' runs them"
        )
    )
    return 0


def _run_all(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """``fsm run --all [MACHINE] [--jobs N]``: one line per instance as it ends, totals on
    stderr, the fleet's exit code."""
    from fsm.cli.fleet import drive_all, exit_code
    from fsm.model.discovery import open_machine, registered_machines

    if args.id is not None:
        raise InputError("--all runs every runnable instance: give no ID (only a MACHINE)")
    if args.interactive:
        raise InputError("--all cannot be --interactive (a menu serves one instance)")
    if args.jobs < 1:
        raise InputError("--jobs must be 1 or more")
    workspace = _workspace(values)
    names = [args.machine] if args.machine else sorted(registered_machines())
    machines = [open_machine(name) for name in names]

    results = drive_all(
        workspace, machines, jobs=args.jobs, max_steps=args.max_steps, on_result=_show_driven
    )
    shown = _totals(results) or "none was runnable"
    print(f"fsm: {len(results)} instances run: {shown}", file=sys.stderr)
    return exit_code(results)


def _show_driven(driven: Driven) -> None:
    """The line of one instance a fleet or a worker drove, as it ends (also into a pipe)."""
    from fsm.cli.fleet import line_of

    out(line_of(driven))
    sys.stdout.flush()


def _totals(results: Sequence[Driven]) -> str:
    """How many of ``results`` ended each way (``2 completed, 1 failed``; empty for none)."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


def _menu(state: str, choices: Sequence[Any]) -> str | None:
    print(f"\nstate '{state}': choose an action", file=sys.stderr)
    for number, choice in enumerate(choices, start=1):
        shown = one_line(f"  {number}. {choice.event:<14} {choice.description}")
        print(shown, file=sys.stderr)
    print("  q. quit (leave the instance as it is)", file=sys.stderr)
    while True:
        sys.stderr.write("> ")
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:  # end of input
            return None
        answer = line.strip()
        if answer in {"q", "quit", ""}:
            return None
        if answer.isdigit() and 1 <= int(answer) <= len(choices):
            return str(choices[int(answer) - 1].event)
        for choice in choices:
            if answer == choice.event:
                return str(choice.event)
        print(one_line(f"  unknown choice '{answer}'"), file=sys.stderr)


def _step_exit(instance: Instance, result: Any, machine_word: str) -> int:
    machine = instance.machine
    if result.outcome == "failed":
        print(f"fsm: error: {one_line(str(result.error))}", file=sys.stderr)
        return 1
    if result.outcome in {"waiting", "blocked"}:
        reason = (
            "no automatic transition is enabled"
            if result.outcome == "waiting"
            else f"instance is {result.status}{_how_to_activate(instance, machine_word)}"
        )
        print(one_line(f"fsm: {reason}"), file=sys.stderr)
        return 5
    line = f"{instance.id}: {result.source or result.state} -> {result.state}" + (
        f" ({result.event})" if result.event else ""
    )
    if not machine.is_final(result.state):
        out(line)
        return 0
    verdict = machine.verdict(result.state, instance.load().doc)
    assert verdict is not None  # the state is final
    out(f"{line}: {'success' if verdict.success else 'failure'}: {verdict.reason}")
    return 0 if verdict.success else 4


def _how_to_activate(instance: Instance, machine_word: str) -> str:
    """``: 'fsm start M ID' starts it`` (or resumes it) when a control command would let it
    step, with the machine named as the user named it; else nothing."""
    from fsm.engine.control import ControlPlane

    control = ControlPlane(instance)
    loaded = instance.load()
    allowed = control.allowed(loaded)
    if "resume" in allowed and not control.needs_start(loaded):
        return f": '{shlex.join(['fsm', 'resume', machine_word, instance.id])}' resumes it"
    if "start" in allowed:
        start = shlex.join(["fsm", "start", machine_word, instance.id])
        run = shlex.join(["fsm", "run", machine_word, instance.id])
        return f": '{start}' starts it, '{run}' starts it and drives it to the end"
    return ""


def cmd_step(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """One automatic step."""
    from fsm.engine.engine import Engine

    instance = instance_from(args, values)
    result = Engine(instance).step(actor="cli")
    return _step_exit(instance, result, args.machine)


def cmd_fire(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Fire a named event."""
    from fsm.engine.engine import Engine

    instance = instance_from(args, values)
    result = Engine(instance).fire(args.event, actor=args.actor, reason=args.reason)
    return _step_exit(instance, result, args.machine)


def cmd_command(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Run a command of the machine's own (see :mod:`fsm.engine.commands`)."""
    from fsm.engine.commands import machine_command, run_command
    from fsm.model.inputs import parse_set_values

    instance = instance_from(args, values)
    command = machine_command(instance, args.name)
    inputs = parse_set_values(instance.machine, args.values, command.inputs_model)
    saved = run_command(instance, args.name, inputs, actor=args.actor, reason=args.reason)
    out(f"{instance.id}: {args.name} done (state '{saved.state}')")
    return 0


def cmd_status(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Show an instance."""
    from fsm.view.inspect import status

    info = status(instance_from(args, values))
    if args.json:
        emit_json(info.to_json())
        return 0
    out(f"{info.machine} {info.id}")
    out(f"  state:   {info.state} ({info.state_description})")
    if info.status is not None:
        out(f"  status:  {info.status}")
    if info.outcome:
        out(f"  outcome: {info.outcome}: {info.reason}")
    elif info.reason:
        out(f"  reason:  {info.reason}")
    for key, value in info.summary.items():
        out(f"  {key + ':':<8} {value}")
    if info.last_agent is not None:
        from fsm.process.agent_runs import run_line

        out(one_line(f"  agent:   {run_line(info.last_agent)} (at {info.last_agent['time']})"))
    if info.definition is not None:
        out(one_line(f"  version: {version_line(info.definition)}"))
    driver = driver_line(info.driver, info.runnable, f"fsm run {args.machine} {info.id}")
    if driver:
        out(one_line(f"  driver:  {driver}"))
    enabled = [e.event + ("" if e.auto else " (manual)") for e in info.events if e.enabled]
    out(f"  events:  {', '.join(enabled) or 'none'}")
    if info.control:
        out(f"  control: {', '.join(info.control)}")
    out(f"  file:    {info.document}")
    return 0


def version_line(definition: dict[str, Any]) -> str:
    """``2 (graph 78d54974)``, with what the installed definition does with it when it is not
    the one the instance runs under (see :func:`fsm.view.inspect.definition_of`)."""
    installed = f"{definition['installed_version']} (graph {definition['installed_graph'][:8]})"
    if definition["graph"] is None:
        return f"not recorded (created before versions were); installed {installed}"
    runs = f"{definition['version']} (graph {definition['graph'][:8]})"
    if definition["graph"] == definition["installed_graph"]:
        return runs
    if definition["problem"]:
        return f"{runs}; the installed {installed} cannot run it: {definition['problem']}"
    if definition["migrates"]:
        return f"{runs}; its next run migrates it to the installed {installed}"
    return f"{runs}; the installed {installed} runs it (same version, another graph)"


def driver_line(
    driver: dict[str, Any] | None, waiting: bool, command: str, now: float | None = None
) -> str:
    """Who drives the instance (``run pid 4242 on build-7, action develop for 12 s``), or, when
    nobody does and it waits for a run, that nobody does and the command that would; empty
    when nobody needs to (the instance ended, or is paused)."""
    if driver is None:
        return f"nobody is driving it: '{command}' would" if waiting else ""
    line = f"{driver['driver']} pid {driver['pid']} on {driver['host']}"
    if driver.get("action") and driver.get("action_started") is not None:
        seconds = max(0, round((time.time() if now is None else now) - driver["action_started"]))
        line += f", action {driver['action']} for {seconds} s"
    return line


def cmd_ls(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """List instances (rows of documents unchanged since the last listing come from its index:
    see :mod:`fsm.view.listing_index`)."""
    from fsm.model.discovery import registered_machines
    from fsm.view.listing_index import list_indexed

    path = Path(values.get("workspace", "."))
    if not path.is_dir():
        raise InputError(f"workspace {path} is not a folder")
    names = [args.machine] if args.machine else sorted(registered_machines())
    items = values.get("options") or []
    rows = list_indexed(
        path.resolve(), names, args.status_filter, items, lambda: _workspace(values)
    )
    failed = [row.error for row in rows if row.id == "-" and row.error]
    broken = set(failed)
    if len(names) > 1 and len(failed) == len(names) and len(broken) == 1:
        # Every machine failed the same way: the workspace's store cannot be opened (an
        # unknown store, no space for a shared one). That is the command's error, as it is for
        # fsm new or fsm status, not one row per machine with exit 0.
        from fsm.base.errors import OptionsError

        raise OptionsError(broken.pop())
    if args.status_filter is not None and not rows:
        from fsm.view.listing_filters import check_status_filter

        check_status_filter(
            args.status_filter, names, path.resolve(), items, lambda: _workspace(values)
        )
    rows = _unserved(rows, names, values)
    if args.json:
        emit_json([row.to_json() for row in rows])
        return 0
    if not rows:
        which = f" of {args.machine}" if args.machine else ""
        status = f" with status {args.status_filter}" if args.status_filter is not None else ""
        print(f"fsm: no instances{which}{status} in {path.resolve()}", file=sys.stderr)
        return 0
    out(f"{'MACHINE':<14} {'ID':<44} {'STATUS':<10} {'STATE':<12} UPDATED")
    for row in rows:
        shown = row.error or f"{row.status or '-':<10} {row.state or '-':<12} {row.updated}"
        if row.outcome == "failure" and not row.error:
            shown += f"  {row.reason}"
        if row.runs:
            shown += f"  [{row.runs}]"
        out(one_line(f"{row.machine:<14} {row.id:<44} {shown}"))
    return 0


def _unserved(rows: list[Any], targets: list[str], values: dict[str, Any]) -> list[Any]:
    """``rows`` with the runnable instances of a version no live worker runs flagged, for
    machines whose store knows its workers (PostgreSQL) and that some live worker runs."""
    from dataclasses import replace

    if not rows or not _workers_store(values):
        return rows
    from fsm.base.errors import FsmError
    from fsm.engine.rules import runnable

    workspace = _workspace(values)
    served: dict[str, tuple[Any, set[str] | None]] = {}
    for target in targets:
        try:
            machine = workspace.machine(target)
            ask = getattr(workspace.store_for(machine), "served_versions", None)
        except FsmError:  # its rows say what is wrong with it
            continue
        served[machine.name] = (machine, ask() if ask is not None else None)
    flagged = []
    for row in rows:
        if row.machine not in served:
            flagged.append(row)
            continue
        machine, versions = served[row.machine]
        version = row.version or str(machine.spec.version)
        if (
            versions is not None
            and version not in versions
            and row.error is None
            and row.state is not None
            and runnable(machine, row.state, row.status)
        ):
            note = f"no live worker runs {row.machine} {version}"
            flagged.append(replace(row, runs=f"{row.runs}; {note}" if row.runs else note))
        else:
            flagged.append(row)
    return flagged


def _workers_store(values: dict[str, Any]) -> bool:
    """Whether the workspace may use a store other than its files (``FSM_STORE``, or a
    ``[store]`` table): only then are its workers asked what they run (a plain listing reads
    no configuration)."""
    import os

    if os.environ.get("FSM_STORE"):
        return True
    toml = Path(values.get("workspace", ".")) / "fsm.toml"
    try:
        return "[store]" in toml.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def cmd_history(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Print the journal as it is read (or only its last ``--tail`` records, read from its end).

    Each record is one line: readable text (:func:`fsm.view.history.history_line`), with
    ``--changes`` followed by the fields it changed (:func:`fsm.view.history.change_lines`), or
    with ``--json`` the record as the journal holds it (compact JSON, which holds its changes),
    characters a terminal would act on escaped.
    """
    from fsm.model.records import Record
    from fsm.view.history import change_lines, history_line

    def shown(record: Record) -> str:
        if not getattr(args, "changes", False):
            return history_line(record)
        return "\n".join([history_line(record), *change_lines(record)])

    instance = instance_from(args, values)
    if args.tail is not None:
        if args.tail < 0:
            raise InputError("--tail must be 0 or more")
        if args.json:
            raw = list(itertools.islice(instance.journal.backwards(), args.tail))
            sys.stdout.writelines(_json_line(data) + "\n" for data in reversed(raw))
        else:
            records = list(itertools.islice(instance.journal.records_backwards(), args.tail))
            sys.stdout.writelines(shown(record) + "\n" for record in reversed(records))
        return 0
    if args.json:
        return _history_json(instance)
    lines: list[str] = []
    for number, record in instance.journal.entries():
        if isinstance(record, Record):
            lines.append(shown(record) if getattr(args, "changes", False) else history_line(record))
            if len(lines) < 4096:
                continue
            _write_lines(lines)
            continue
        _write_lines(lines)  # the warning comes after the lines before it
        warning = (
            f"journal line {number} is unreadable and was skipped"
            if record is None
            else f"{record}; it was skipped"
        )
        print(f"fsm: warning: {warning}", file=sys.stderr)
    _write_lines(lines)
    return 0


def _write_lines(lines: list[str]) -> None:
    """Print ``lines`` (each without its newline), and forget them."""
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
        lines.clear()


def _history_json(instance: Instance) -> int:
    """Every journal line's object as the line holds it (a line that is not a record this fsm
    reads is still shown: nothing here reads its fields)."""
    lines: list[str] = []
    for number, line, data in instance.journal.scan():
        if data is None:
            sys.stdout.writelines(lines)
            lines.clear()
            warning = f"fsm: warning: journal line {number} is unreadable and was skipped"
            print(warning, file=sys.stderr)
        elif _safe_as_written(line):
            lines.append(line + "\n")  # nothing to escape, nothing to encode again
        else:
            lines.append(_json_line(data) + "\n")
        if len(lines) >= 4096:
            sys.stdout.writelines(lines)
            lines.clear()
    sys.stdout.writelines(lines)
    return 0


def _safe_as_written(line: str) -> bool:
    """True when a journal line that parsed can be printed as it is: ASCII, so its only raw
    characters a terminal acts on can be JSON's tab and carriage return, and DEL."""
    return line.isascii() and "\t" not in line and "\r" not in line and "\x7f" not in line


def _json_line(record: dict[str, Any]) -> str:
    return json_text(record, separators=(",", ":"))


def cmd_recover(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Rebuild a corrupt document."""
    from fsm.engine.recovery import recover

    instance = instance_from(args, values, must_exist=False)
    report = recover(instance)
    if report.moved_aside:
        out(f"corrupt document kept as {report.moved_aside}")
    for note in report.notes:
        out(f"note: {note}")
    if report.recovered:
        out(f"{instance.id}: recovered in state '{report.state}'")
    return 0


def cmd_serve(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Serve the live web view until Ctrl-C (see :mod:`fsm.serve`)."""
    from fsm.serve.server import ServeOptions, run, served_machines

    served = served_machines(_workspace(values), args.machines)
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers {args.workers} must be 1 or more")
    drive = args.workers if args.workers is not None else (1 if args.drive else 0)
    if not args.header_timeout > 0:
        raise InputError(f"--header-timeout {args.header_timeout} must be more than 0")
    if args.max_connections < 1:
        raise InputError(f"--max-connections {args.max_connections} must be 1 or more")
    options = ServeOptions(
        args.host,
        args.port,
        args.allow_remote,
        args.token_file,
        args.max_body,
        args.reads,
        drive,
        args.header_timeout,
        args.max_connections,
    )
    run(served, options)
    return 0
