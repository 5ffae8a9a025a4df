"""The commands about machines rather than instances: machines, options, schema, check, diagram."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from fsm.base.errors import FsmError, InputError
from fsm.view.terminal import emit_json, out, printable

__all__ = [
    "cmd_check",
    "cmd_coverage",
    "cmd_diagram",
    "cmd_init",
    "cmd_machines",
    "cmd_options",
    "cmd_schema",
    "cmd_test_paths",
]


def cmd_machines(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """List registered machines; one that does not load is a row saying why (exit 1), never
    hiding the others."""
    from fsm.model.discovery import name_clashes, open_machine, registered_machines

    for message in name_clashes().values():
        print(f"fsm: warning: {printable(message)}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    for name, entry in sorted(registered_machines().items()):
        row: dict[str, Any] = {"name": name, "source": entry.source, "path": str(entry.path)}
        try:
            machine = open_machine(name)
        except FsmError as exc:
            row.update(description=None, version=None, error=str(exc))
        else:
            row.update(description=machine.spec.description, version=machine.spec.version)
        rows.append(row)
    if args.json:
        emit_json(rows)
    else:
        for row in rows:
            if "error" in row:
                out(f"{row['name']:<16} CANNOT LOAD: {printable(row['error'])}")
                continue
            text = str(row["description"])
            summary = text if len(text) <= 80 else text[:77].rstrip() + "..."
            out(f"{row['name']:<16} {summary}  [{row['source']}]")
    broken = [row["name"] for row in rows if "error" in row]
    if broken:
        print(
            f"fsm: error: {len(broken)} machine(s) cannot be loaded: {', '.join(broken)}",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_check(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Static checks."""
    from fsm.model.check import check_all, check_target

    reports = [check_target(t) for t in args.targets] if args.targets else check_all()
    code = 0
    for report in reports:
        if not report.readable:
            # A file that cannot be read is an error of the command (exit 2), on stderr; the
            # findings of files that were read are the command's result, on stdout.
            for finding in report.findings:
                print(
                    f"fsm: error: {printable(finding.path)}: {printable(finding.message)}",
                    file=sys.stderr,
                )
        else:
            for finding in report.findings:
                out(finding.render())
        history = _history_findings(report.target, values) if report.exit_code == 0 else []
        for line in history:
            out(printable(line))
        if not report.findings and not history:
            out(f"{report.target}: ok")
        code = max(code, report.exit_code, 1 if history else 0)
    return code


def _history_findings(target: str, values: dict[str, Any]) -> list[str]:
    """The findings of a machine that checked clean against the definitions its instances in
    the workspace run under (:mod:`fsm.engine.history_check`), as ``path: error: ...``."""
    from fsm.base.errors import FsmError
    from fsm.cli.command_values import workspace_from
    from fsm.engine.history_check import check_history

    try:
        workspace = workspace_from(values)
        machine = workspace.machine(target)
        findings = check_history(workspace, machine)
    except FsmError:  # no instances to check against (a store that cannot be opened)
        return []
    return [f"{machine.path}: error: {finding}" for finding in findings]


def cmd_diagram(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Write diagrams."""
    from fsm.model.discovery import open_machine, registered_machines
    from fsm.view import diagram

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - {"dot", "svg", "png", "mmd"})
    if unknown:
        raise InputError(f"unknown diagram format '{unknown[0]}' (use dot, svg, png, mmd)")
    if args.run and args.coverage:
        raise InputError("--run and --coverage draw different counts: give one")
    if args.run or args.coverage:
        flag = "--run" if args.run else "--coverage"
        if len(args.machines) != 1:
            raise InputError(f"{flag} needs exactly one MACHINE")
        if args.run:
            args.machine, args.id = args.machines[0], args.run
            from fsm.cli.command_values import instance_from

            instance = instance_from(args, values)
            loaded = instance.load()
            overlay = diagram.overlay_from_journal(instance.journal.records(), loaded.state)
            machine, default = instance.machine, f"{instance.id}.svg"
        else:
            from fsm.coverage.report import read_report

            machine = open_machine(args.machines[0])
            overlay = diagram.overlay_from_coverage(machine, read_report(Path(args.coverage)))
            default = f"{machine.name}-coverage.svg"
        dot = diagram.to_dot(machine, run=overlay)
        target = Path(args.output) if args.output else Path(default)
        fmt = target.suffix.lstrip(".") or "svg"
        if fmt == "dot":
            target.write_text(dot, encoding="utf-8")
        elif fmt in {"svg", "png"}:
            target.write_bytes(diagram.render(dot, fmt))  # type: ignore[arg-type]
        else:
            raise InputError(f"{flag} writes .dot, .svg or .png, not '{target.suffix}'")
        out(str(target))
        return 0
    names = args.machines or sorted(registered_machines())
    out_dir = Path(args.output or "diagrams")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        report = diagram.write_diagrams(open_machine(name), out_dir, formats)
        for path in report.written:
            out(str(path))
        for fmt, reason in report.skipped:
            print(f"fsm: warning: {name}.{fmt} not written: {reason}", file=sys.stderr)
    return 0


def cmd_coverage(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Edges real runs took, joined with a test suite's report (see fsm.coverage.production)."""
    from fsm.cli.command_values import workspace_from
    from fsm.coverage.production import join, production_tally, render
    from fsm.coverage.report import read_report

    if args.journals is None:
        raise InputError(
            "fsm coverage reads real runs: give --journals [WORKSPACE] (and --tests REPORT to "
            "join them with a test suite's); a test suite's own coverage is pytest --fsm-cov"
        )
    where = dict(values)
    if args.journals:
        where["workspace"] = args.journals
    workspace = workspace_from(where)
    machine = workspace.machine(args.machine)
    tests = read_report(Path(args.tests)) if args.tests else None
    joined = join(machine, production_tally(workspace, machine), tests)
    if args.json:
        emit_json(
            {
                "machine": machine.name,
                "production": joined.production,
                "untested": [{"edge": e, "count": c} for e, c in joined.untested],
                "neither": joined.neither,
            }
        )
        return 0
    for line in render(joined, machine.name, tests=tests is not None):
        out(line)
    return 0


def cmd_test_paths(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Generated paths (see fsm.testing.paths); what the search did not take goes to stderr."""
    import json

    from fsm.coverage.report import machine_section, read_report
    from fsm.coverage.tally import Edge
    from fsm.model.discovery import open_machine

    # Against the layers, written down in scripts/architecture.py's EXCEPTIONS: the search
    # runs the testing kit, whose tests it writes.
    from fsm.testing.paths import agent_says, explore, write_tests  # noqa: TID251

    machine = open_machine(args.machine)
    inputs = []
    for text in args.inputs:
        try:
            given = json.loads(text)
        except ValueError as exc:
            raise InputError(f"--inputs {text!r} is not JSON: {exc}") from None
        if not isinstance(given, dict):
            raise InputError(f"--inputs {text!r} is not a JSON object")
        inputs.append(given)
    files = {}
    for item in args.file:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InputError(f"--file {item!r}: give PATH=TEXT")
        files[name] = text.replace("\\n", "\n")
    answers = agent_says(args.agent_says)
    skip: list[Edge] = []
    skip_control: list[tuple[str, str]] = []
    if args.tests:
        section = machine_section(read_report(Path(args.tests)), machine.name, str(machine.path))
        skip = [
            Edge(e["source"], e["event"], e["dest"], e["transition"])
            for e in section["edges"]
            if e["count"]
        ]
        skip_control = [(c["command"], c["from"]) for c in section["control"] if c["count"]]
    found = explore(
        machine,
        inputs=inputs or None,
        files=files,
        answers=answers,
        seconds=args.seconds,
        depth=args.depth,
    )
    beside = Path(args.out).parent if args.out else None
    source = write_tests(found, args.machine, skip=skip, skip_control=skip_control, beside=beside)
    if args.out:
        Path(args.out).write_text(source, encoding="utf-8")
        out(args.out)
    else:
        sys.stdout.write(source)
    taken = len(found.best)
    print(
        f"fsm: {taken} of {taken + len(found.missed())} edges taken in {found.runs} paths "
        f"({found.seconds:.1f}s{', search cut short' if found.truncated else ''})",
        file=sys.stderr,
    )
    for line in found.missed():
        print(f"fsm: not reached: {line}", file=sys.stderr)
    return 0


def cmd_options(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """A machine's options and creation inputs."""
    from fsm.model.discovery import open_machine
    from fsm.model.settings import input_settings, option_settings

    machine = open_machine(args.machine)
    options, inputs = option_settings(machine), input_settings(machine)
    if args.json:
        emit_json(
            {
                "machine": machine.name,
                "options": [s.to_json() for s in options],
                "inputs": [s.to_json() for s in inputs] if machine.inputs_model else None,
            }
        )
        return 0
    name = machine.name
    out(f"{name} options: set in fsm.toml [machine.{name}], or for one command with -o KEY=VALUE")
    _table(options, "  (none)")
    out("")
    if machine.inputs_model is None:
        out(f"{name} creation inputs: any field of its document (see 'fsm schema {name}')")
        return 0
    out(f"{name} creation inputs: fsm new {name} --set KEY=VALUE (or --input FILE.json)")
    _table(inputs, "  (none)")
    return 0


def _table(settings: list[Any], empty: str) -> None:
    if not settings:
        out(empty)
        return
    width = max(len(s.name) for s in settings) + 2
    kinds = min(max(len(s.type) for s in settings), 32) + 2
    for setting in settings:
        default = "required" if setting.required else f"default {setting.default}"
        kind = f"{setting.type} ".ljust(kinds)  # a space even after the longest type
        out(f"  {setting.name:<{width}}{kind}{default}")
        indent = " " * (width + 2)
        for line in textwrap.wrap(
            setting.help, 100, initial_indent=indent, subsequent_indent=indent
        ):
            out(line)


def cmd_schema(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """The JSON Schema of a machine's document or options."""
    from fsm.model.discovery import open_machine

    machine = open_machine(args.machine)
    model = machine.options_model if args.options else machine.document_model
    emit_json(model.model_json_schema(by_alias=True))
    return 0


def cmd_init(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Write a commented fsm.toml: every registered machine's options with their defaults and
    help, the workspace's own machines and the store, all commented out (nothing changes until
    a line is uncommented). An existing fsm.toml is never overwritten."""
    from fsm.model.discovery import open_machine, registered_machines
    from fsm.model.settings import option_settings

    path = Path(values.get("workspace", "."))
    if not path.is_dir():
        raise InputError(f"workspace {path} is not a folder")
    target = path / "fsm.toml"
    if target.exists() or target.is_symlink():
        raise InputError(
            f"{target} exists: fsm init never overwrites it ('fsm options MACHINE' "
            "lists what it may hold)"
        )
    lines = [
        "# fsm.toml: this workspace's fsm settings, written by 'fsm init'. Every setting below is",
        "# commented out and shows its default: uncomment and change what you need.",
        "# 'fsm options MACHINE' lists a machine's options; -o KEY=VALUE sets one for a command.",
        "",
        "# This workspace's own machines, by name (a folder holding machine.yaml, or the file):",
        "# [machines]",
        '# mine = "machines/mine"',
    ]
    for name in sorted(registered_machines()):
        try:
            machine = open_machine(name)
        except FsmError:
            continue  # fsm machines says why it cannot be loaded
        lines += ["", f"# [machine.{name}]"]
        for setting in option_settings(machine):
            if setting.help:
                lines += [
                    f"# {text}"
                    for text in textwrap.wrap(
                        setting.help, 96, initial_indent="  ", subsequent_indent="  "
                    )
                ]
            lines.append(_commented_setting(setting.name, setting.default, setting.required))
    lines += [
        "",
        "# Where instances are kept: files in this folder (the default), or a PostgreSQL database",
        "# shared by workers on several hosts (docs/scale-out.md; 'fsm store init' sets it up).",
        "# [store]",
        '# url = "postgresql://fsm@db.internal/fsm"',
        "",
    ]
    text = "\n".join(lines)
    with open(target, "x", encoding="utf-8") as file:  # "x": never over a file made meanwhile
        file.write(text)
    out(f"wrote {target}: every setting is commented out; uncomment what you need")
    return 0


def _commented_setting(name: str, default: str, required: bool) -> str:
    """``# name = value``, the default written as TOML (a JSON object as an inline table); a
    setting with no default value (required, or None) is left for the user to fill in."""
    if required:
        return f"# {name} =    # required: no default"
    try:
        value = json.loads(default) if default else None
    except ValueError:  # a default JSON cannot write: shown, for the user to write in TOML
        return f"# {name} =    # default: {default}"
    if value is None:
        return f"# {name} =    # default: none (unset)"
    return f"# {name} = {_toml_value(value)}"


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items())
        return f"{{ {inner} }}" if inner else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return json.dumps(value)
