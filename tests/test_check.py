"""The static checks of ``fsm check`` (SPEC 3.2): each rule, reports, exit codes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fsm.model import discovery
from fsm.model._check_graph import finding_line
from fsm.model.check import CheckReport, Finding, check_all, check_machine, check_target
from fsm.model.discovery import MachineEntry
from fsm.model.machine import load_machine

COUNTER = Path(__file__).parent / "engine_machines" / "counter"

FUNCTIONS = """
from __future__ import annotations

from pydantic import BaseModel

from fsm.model.registry import Registry

registry = Registry()


@registry.document
class Doc(BaseModel):
    phase: str = "start"
    count: int = 0


@registry.guard(budget=True)
def within_budget(doc, ctx):
    return doc.count < 3


@registry.guard
def ready(doc, ctx):
    return True


@registry.guard
def passed(doc, ctx):
    return doc.count > 1


@registry.guard
def failed(doc, ctx):
    return doc.count == 0


@registry.action
def work(doc, ctx):
    return {"count": doc.count + 1}
"""

HEADER = """\
name: probe
version: 1
description: A machine for the check tests.
module: functions.py
document: Doc
state: {field: phase}
initial: start
storage: {document: "{id}.json"}
exclusive: [[passed, failed]]
"""

STATES = """\
states:
  start: {description: Not started.}
  working: {description: Working.}
  done: {description: Finished., final: true, tags: [success]}
  failed: {description: Gave up., final: true, tags: [failure]}
"""

GO = "  - {event: go, source: start, dest: working, description: Start.}\n"
LOOP = (
    "  - {event: again, source: working, dest: working, guards: [within_budget],"
    " actions: [work], description: Once more.}\n"
)
FINISH = "  - {event: finish, source: working, dest: done, guards: [passed], description: Done.}\n"
GIVE_UP = "  - {event: quit, source: working, dest: failed, guards: [failed], description: Quit.}\n"
TRANSITIONS = "transitions:\n" + GO + LOOP + FINISH + GIVE_UP


def write_machine(folder: Path, text: str, *, functions: str = FUNCTIONS) -> Path:
    """Write ``machine.yaml`` (and its functions module) into ``folder``; return the file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "functions.py").write_text(functions, encoding="utf-8")
    path = folder / "machine.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def check_text(folder: Path, text: str) -> CheckReport:
    """The report of ``text`` written as a machine file in ``folder``."""
    return check_target(str(write_machine(folder, text)))


def transition(body: str) -> str:
    """One more transition line."""
    return f"  - {{{body}, description: Test.}}\n"


# (id, machine text, check that must fire, words its message must contain)
BROKEN = [
    pytest.param(
        HEADER
        + STATES
        + TRANSITIONS.replace(
            "dest: working, description: Start", "dest: wrking, description: Start"
        ),
        "unknown-state",
        ["transitions[0].dest", "'wrking'", "did you mean 'working'?"],
        id="unknown-dest",
    ),
    pytest.param(
        HEADER + STATES + TRANSITIONS + transition("event: x, source: strat, dest: done"),
        "unknown-state",
        ["transitions[4].source", "'strat'", "did you mean 'start'?"],
        id="unknown-source",
    ),
    pytest.param(
        HEADER + STATES + TRANSITIONS.replace("guards: [passed]", "guards: [pased]"),
        "unresolved-name",
        ["transitions[2].guards[0]", "guard 'pased'", "did you mean 'passed'?"],
        id="unresolved-guard",
    ),
    pytest.param(
        HEADER + STATES + TRANSITIONS.replace("actions: [work]", "actions: [wrok]"),
        "unresolved-name",
        ["transitions[1].actions[0]", "action 'wrok'", "did you mean 'work'?"],
        id="unresolved-action",
    ),
    pytest.param(
        HEADER.replace("document: Doc", "document: Document") + STATES + TRANSITIONS,
        "unresolved-name",
        ["document", "'Document'"],
        id="unresolved-model",
    ),
    pytest.param(
        HEADER + "hooks: {create: make}\n" + STATES + TRANSITIONS,
        "unresolved-name",
        ["hooks.create", "hook 'make'"],
        id="unresolved-hook",
    ),
    pytest.param(
        HEADER
        + STATES
        + "  orphan: {description: Never entered.}\n"
        + TRANSITIONS
        + transition("event: leave, source: orphan, dest: done"),
        "unreachable",
        ["states.orphan", "'orphan'", "'start'"],
        id="unreachable",
    ),
    pytest.param(
        HEADER
        + STATES
        + "  stuck: {description: No way out.}\n"
        + TRANSITIONS
        + transition("event: stick, source: working, dest: stuck, guards: [ready]"),
        "trap",
        ["states.stuck", "'stuck'"],
        id="trap",
    ),
    pytest.param(
        HEADER + STATES + TRANSITIONS + transition("event: redo, source: [done], dest: working"),
        "final-outgoing",
        ["transitions[4].source[0]", "'done'", "'redo'"],
        id="final-outgoing",
    ),
    pytest.param(
        HEADER
        + STATES
        + "  spinning: {description: Spins.}\n"
        + TRANSITIONS
        + transition("event: spin, source: start, dest: spinning")
        + transition("event: spin, source: spinning, dest: '=', guards: [within_budget]"),
        "no-final-reachable",
        ["states.spinning", "'spinning'"],
        id="no-final-reachable",
    ),
    pytest.param(
        HEADER
        + STATES.replace(", final: true, tags: [success]", "").replace(
            ", final: true, tags: [failure]", ""
        )
        + TRANSITIONS,
        "no-final-reachable",
        ["no final state"],
        id="no-final-state",
    ),
    pytest.param(
        HEADER
        + STATES
        + TRANSITIONS
        + transition("event: finish, source: working, dest: failed, guards: [ready]"),
        "ambiguous",
        [
            "transitions[4]",
            "'finish'",
            "'working'",
            "transitions[2] [passed]",
            "transitions[4] [ready]",
        ],
        id="ambiguous",
    ),
    pytest.param(
        HEADER
        + STATES
        + "transitions:\n"
        + GO
        + LOOP
        + GIVE_UP
        + transition("event: finish, source: working, dest: done")
        + transition("event: finish, source: working, dest: failed, guards: [ready]"),
        "shadowed",
        ["transitions[4]", "'working'", "'finish'", "transitions[3]"],
        id="shadowed",
    ),
    pytest.param(
        HEADER
        + STATES
        + "  retry: {description: Retry.}\n"
        + TRANSITIONS
        + transition("event: fail, source: working, dest: retry, guards: [ready]")
        + transition("event: retry, source: retry, dest: working"),
        "unbounded-cycle",
        ["'working', 'retry'", "transitions[4]", "transitions[5]"],
        id="unbounded-cycle",
    ),
    pytest.param(
        HEADER + STATES + TRANSITIONS + transition("event: poll, source: working, dest: '='"),
        "unbounded-cycle",
        ["'working'", "transitions[4]"],
        id="unbounded-self-loop",
    ),
    pytest.param(
        HEADER + STATES + TRANSITIONS + transition("event: poll, source: '*', dest: '='"),
        "unbounded-cycle",
        ["'start'", "transitions[4]"],
        id="unbounded-star-self-loop",
    ),
    pytest.param(
        HEADER
        + STATES
        + "  review: {description: Reviewed by an agent.}\n"
        + TRANSITIONS
        + transition("event: ask, source: working, dest: review, guards: [not within_budget]")
        + transition("event: revise, source: review, dest: working, actions: [work]"),
        "unbounded-cycle",
        ["'working', 'review'", "running 'work'", "unbounded:"],
        id="negated-budget-guard-bounds-nothing",
    ),
    pytest.param(
        HEADER
        + STATES
        + "  review: {description: Reviewed by an agent.}\n"
        + TRANSITIONS
        + transition("event: ask, source: working, dest: review, guards: [ready], actions: [work]")
        + transition("event: revise, source: review, dest: working, guards: [failed]"),
        "unbounded-cycle",
        ["'working', 'review'", "transitions[4], transitions[5]", "budget=True"],
        id="review-loop-without-budget-guard",
    ),
    pytest.param(
        HEADER + STATES.replace(", tags: [success]", "") + TRANSITIONS,
        "untagged-final",
        ["states.done", "'done'", "success", "failure"],
        id="untagged-final",
    ),
    pytest.param(
        HEADER + STATES + TRANSITIONS.replace("dest: done,", "dets: done,"),
        "schema",
        ["transitions[2].dets", "did you mean 'dest'?"],
        id="schema-unknown-key",
    ),
    pytest.param(
        HEADER.replace("module: functions.py", "module: missing.py") + STATES + TRANSITIONS,
        "import",
        ["cannot import 'missing.py'"],
        id="import",
    ),
]


@pytest.mark.parametrize(("text", "check", "words"), BROKEN)
def test_each_rule_catches_its_broken_definition(
    tmp_path: Path, text: str, check: str, words: list[str]
) -> None:
    """A broken definition gives a finding of that rule whose message names the problem."""
    report = check_text(tmp_path, text)
    messages = [f.message for f in report.findings if f.check == check]
    assert messages, [f.render() for f in report.findings]
    assert any(all(word in m for word in words) for m in messages), messages
    assert report.exit_code == 1


# (id, machine text, check that must stay quiet)
ACCEPTED = [
    pytest.param(
        HEADER
        + STATES
        + TRANSITIONS
        + transition("event: quit, source: working, dest: done, guards: [passed]"),
        "ambiguous",
        id="same-exclusive-group",
    ),
    pytest.param(
        HEADER
        + STATES
        + "transitions:\n"
        + GO.replace("dest: working,", "dest: working, guards: [not ready],")
        + LOOP
        + FINISH
        + GIVE_UP
        + transition("event: go, source: start, dest: done, guards: [ready]"),
        "ambiguous",
        id="guard-and-its-negation",
    ),
    pytest.param(
        HEADER
        + STATES
        + TRANSITIONS
        + transition("event: finish, source: working, dest: failed, guards: [ready, failed]"),
        "ambiguous",
        id="exclusive-through-one-conjunct",
    ),
    pytest.param(
        HEADER
        + STATES
        + "transitions:\n"
        + LOOP
        + FINISH
        + GIVE_UP
        + transition("event: go, source: start, dest: done, guards: [ready]")
        + GO,
        "ambiguous",
        id="unguarded-fallback-last",
    ),
    pytest.param(
        HEADER
        + STATES
        + "transitions:\n"
        + LOOP
        + FINISH
        + GIVE_UP
        + transition("event: go, source: start, dest: done, guards: [ready]")
        + GO,
        "shadowed",
        id="fallback-last-shadows-nothing",
    ),
    pytest.param(
        HEADER
        + STATES
        + "  retry: {description: Retry.}\n"
        + TRANSITIONS
        + transition("event: fail, source: working, dest: retry")
        + transition("event: retry, source: retry, dest: working, guards: [within_budget]"),
        "unbounded-cycle",
        id="cycle-with-budget-guard",
    ),
    pytest.param(
        HEADER
        + STATES
        + TRANSITIONS
        + transition("event: poke, source: working, dest: '=', auto: false"),
        "unbounded-cycle",
        id="manual-self-loop",
    ),
    pytest.param(
        HEADER
        + STATES
        + TRANSITIONS
        + transition(
            "event: poll, source: working, dest: '=', actions: [work],"
            " unbounded: 'the queue shrinks at every turn'"
        ),
        "unbounded-cycle",
        id="opted-out-with-a-reason",
    ),
    pytest.param(
        HEADER
        + STATES.replace("  working:", "  limbo: {description: Left by control.}\n  working:")
        + "control:\n  field: status\n  commands:\n"
        "    stop: {source: running, dest: stopped, state: limbo, description: Stop.}\n"
        + TRANSITIONS
        + transition("event: end, source: limbo, dest: failed"),
        "unreachable",
        id="entered-by-control-command",
    ),
]


@pytest.mark.parametrize(("text", "check"), ACCEPTED)
def test_sound_definitions_do_not_trip_the_rule(tmp_path: Path, text: str, check: str) -> None:
    """Declared exclusions, fallbacks, budget guards and control entries satisfy the rules."""
    report = check_text(tmp_path, text)
    assert report.readable
    assert [f.render() for f in report.findings if f.check == check] == []


def test_the_base_probe_machine_is_clean(tmp_path: Path) -> None:
    """The machine the broken cases start from has no finding (so each case breaks one thing)."""
    report = check_text(tmp_path, HEADER + STATES + TRANSITIONS)
    assert report.findings == []
    assert report.exit_code == 0


def test_counter_machine_is_clean() -> None:
    """The engine tests' counter machine passes every check, loaded or given by path."""
    assert check_machine(load_machine(COUNTER / "machine.yaml")) == []
    report = check_target(str(COUNTER))
    assert (report.findings, report.exit_code) == ([], 0)


def test_every_problem_of_a_file_is_reported_at_once_in_line_order(tmp_path: Path) -> None:
    """Name problems and graph problems of one file all come in one report, ordered by line."""
    text = (
        HEADER
        + STATES.replace(", tags: [success]", "")
        + "  stuck: {description: No way out.}\n"
        + "transitions:\n"
        + GO.replace("dest: working", "dest: wroking")
        + LOOP.replace("within_budget", "within_budgte")
        + FINISH
        + GIVE_UP
        + transition("event: stick, source: working, dest: stuck, guards: [ready]")
    )
    report = check_text(tmp_path, text)
    checks = [f.check for f in report.findings]
    assert sorted(checks) == sorted(["untagged-final", "trap", "unknown-state", "unresolved-name"])
    lines = [int(f.path.rsplit(":", 1)[1]) for f in report.findings]
    assert lines == sorted(lines)
    assert report.exit_code == 1


def test_schema_problems_and_name_problems_are_reported_in_one_run(tmp_path: Path) -> None:
    """A misspelt key and a misspelt guard and state (each in its own transition) are all
    reported at once, each at its line: fixing one does not reveal the next."""
    text = (
        HEADER
        + STATES
        + "transitions:\n"
        + GO.replace("dest: working", "dets: working")
        + LOOP.replace("within_budget", "within_budgte")
        + FINISH.replace("dest: done", "dest: dnoe")
        + GIVE_UP
    )
    report = check_text(tmp_path, text)
    shown = sorted((finding_line(f), f.check, f.message) for f in report.findings)
    assert [(line, check) for line, check, _ in shown] == [
        (16, "schema"),
        (16, "schema"),
        (17, "unresolved-name"),
        (18, "unknown-state"),
    ]
    assert "did you mean 'within_budget'?" in shown[2][2]
    assert "did you mean 'done'?" in shown[3][2]
    assert report.exit_code == 1


def test_a_cycle_opted_out_with_a_reason_is_clean(tmp_path: Path) -> None:
    """A cycle without a budget guard, one of whose transitions says why it ends
    (`unbounded: "..."`), passes every check."""
    text = (
        HEADER
        + STATES
        + TRANSITIONS
        + transition("event: poll, source: working, dest: '=', unbounded: 'one item per turn'")
    )
    report = check_text(tmp_path, text)
    assert (report.findings, report.exit_code) == ([], 0)


def test_an_empty_opt_out_reason_is_a_schema_problem(tmp_path: Path) -> None:
    """`unbounded:` needs the reason the cycle ends; an empty one is refused."""
    text = (
        HEADER
        + STATES
        + TRANSITIONS
        + transition("event: poll, source: working, dest: '=', unbounded: ''")
    )
    findings = [f for f in check_text(tmp_path, text).findings if f.check == "schema"]
    assert [f.message.split(":")[0] for f in findings] == ["transitions[4].unbounded"]


def test_a_typo_outside_the_graph_does_not_hide_graph_problems(tmp_path: Path) -> None:
    """An unknown action name is reported together with the graph checks of the same file."""
    text = (
        HEADER
        + STATES
        + TRANSITIONS.replace("[work]", "[wrk]")
        + transition("event: poll, source: working, dest: '='")
    )
    checks = {f.check for f in check_text(tmp_path, text).findings}
    assert checks == {"unresolved-name", "unbounded-cycle"}


def test_unknown_states_are_still_found_when_the_module_does_not_import(tmp_path: Path) -> None:
    """Without an importable module, unknown states are reported but guards are not guessed."""
    text = (
        HEADER.replace("functions.py", "gone.py")
        + STATES
        + TRANSITIONS.replace("dest: done", "dest: doen")
    )
    report = check_text(tmp_path, text)
    assert {f.check for f in report.findings} == {"import", "unknown-state"}
    assert any("did you mean 'done'?" in f.message for f in report.findings)


@pytest.mark.parametrize(
    ("old", "new", "suggestion"),
    [
        pytest.param("dest: done", "dest: dnoe", "did you mean 'done'?", id="state"),
        pytest.param(
            "guards: [failed]", "guards: [not faild]", "did you mean 'failed'?", id="guard"
        ),
    ],
)
def test_typos_get_a_did_you_mean(tmp_path: Path, old: str, new: str, suggestion: str) -> None:
    """A typo'd state or guard name is reported with the closest existing name."""
    report = check_text(tmp_path, HEADER + STATES + TRANSITIONS.replace(old, new))
    assert len(report.findings) == 1
    assert suggestion in report.findings[0].message


def test_finding_renders_as_path_level_message(tmp_path: Path) -> None:
    """A finding prints as ``file:line: level: location: message``."""
    path = write_machine(tmp_path, HEADER + STATES.replace(", tags: [success]", "") + TRANSITIONS)
    (finding,) = check_target(str(path)).findings
    assert finding.level == "warning"
    assert finding.render() == (
        f"{path}:13: warning: states.done: final state 'done' is tagged neither 'success' nor "
        "'failure' (its outcome is unknown)"
    )
    assert Finding("m.yaml", "error", "oops", "x").render() == "m.yaml: error: oops"


def test_exit_code_is_zero_when_clean_and_one_with_findings(tmp_path: Path) -> None:
    """Exit 0 for a clean report, 1 for findings of any level, 1 for a duplicate key."""
    assert CheckReport("x", [], readable=True).exit_code == 0
    warning = Finding("x", "warning", "w", "untagged-final")
    assert CheckReport("x", [warning], readable=True).exit_code == 1
    report = check_text(tmp_path, HEADER + STATES + TRANSITIONS + "initial: idle\n")
    assert [f.message for f in report.findings] == ["duplicate key 'initial'"]
    assert (report.readable, report.exit_code) == (True, 1)


def test_malformed_yaml_is_unreadable_with_its_line(tmp_path: Path) -> None:
    """YAML that does not parse makes the report unreadable (exit 2, as the README says), with
    the problem on its line."""
    report = check_text(tmp_path, HEADER + STATES + "transitions: [\n")
    assert [f.check for f in report.findings] == ["yaml"]
    assert "malformed YAML" in report.findings[0].message
    assert report.findings[0].path.endswith(f":{(HEADER + STATES).count(chr(10)) + 2}")
    assert (report.readable, report.exit_code) == (False, 2)


def _missing(folder: Path) -> Path:
    return folder / "missing.yaml"


def _folder_without_machine(folder: Path) -> Path:
    (folder / "empty").mkdir()
    return folder / "empty"


def _not_utf8(folder: Path) -> Path:
    path = folder / "machine.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    return path


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(_missing, id="missing-file"),
        pytest.param(_folder_without_machine, id="folder-without-machine"),
        pytest.param(_not_utf8, id="not-utf8"),
    ],
)
def test_a_file_that_cannot_be_read_gives_exit_two(
    tmp_path: Path, make: Callable[[Path], Path]
) -> None:
    """An unreadable target gives one finding, ``readable=False`` and exit code 2."""
    report = check_target(str(make(tmp_path)))
    assert len(report.findings) == 1
    assert report.findings[0].check == "unreadable"
    assert (report.readable, report.exit_code) == (False, 2)


def test_unknown_machine_name_is_unreadable_with_a_suggestion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name that is neither registered nor a path gives exit 2 and a "did you mean"."""
    entry = MachineEntry("counter", COUNTER / "machine.yaml", "test")
    monkeypatch.setattr(discovery, "_installed", lambda: ({"counter": entry}, {}))
    report = check_target("countr")
    assert report.exit_code == 2
    assert "did you mean 'counter'?" in report.findings[0].message


def test_check_all_checks_every_registered_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every registered machine gets a report; a name that differs from the file's is a finding."""
    probe = write_machine(tmp_path / "probe", HEADER + STATES + TRANSITIONS)
    entries = {
        "counter": MachineEntry("counter", COUNTER / "machine.yaml", "test"),
        "other": MachineEntry("other", probe, "test"),
    }
    monkeypatch.setattr(discovery, "_installed", lambda: (dict(entries), {}))
    reports = {r.target: r for r in check_all()}
    assert reports["counter"].exit_code == 0
    assert [f.check for f in reports["other"].findings] == ["registered-name"]
    assert "'probe'" in reports["other"].findings[0].message


def test_importing_the_checks_loads_no_heavy_module() -> None:
    """``fsm check`` needs neither Graphviz bindings nor the engine's kernel."""
    code = (
        "import sys, fsm.model.check; "
        "print(sorted(m for m in ('pygraphviz', 'transitions') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_large_machine_is_checked_without_recursion(tmp_path: Path) -> None:
    """A 2,000-state chain with an unbounded cycle through all of it is found as one cycle."""
    count = 2000
    states = "".join(f"  s{i}: {{description: S.}}\n" for i in range(count))
    chain = "".join(
        transition(f"event: next, source: s{i}, dest: s{(i + 1) % count}") for i in range(count)
    )
    text = HEADER.replace("initial: start", "initial: s0") + (
        "states:\n" + states + "  done: {description: D., final: true, tags: [success]}\n"
        "transitions:\n"
        + chain
        + transition("event: end, source: s0, dest: done, guards: [within_budget]")
    )
    findings = check_text(tmp_path, text).findings
    assert [f.check for f in findings] == ["unbounded-cycle"]


def test_a_control_status_the_document_cannot_hold_is_a_finding(tmp_path: Path) -> None:
    """A control command whose destination (or a final state's status) is not a value of the
    document's status field is reported: no instance could ever be written with it."""
    folder = tmp_path / "counter"
    shutil.copytree(COUNTER, folder)
    yaml = folder / "machine.yaml"
    yaml.write_text(
        yaml.read_text()
        .replace("pause: {source: running, dest: paused", "pause: {source: running, dest: halted")
        .replace("status: done}", "status: finished}")
    )
    report = check_target(str(yaml))
    messages = [f.message for f in report.findings]
    assert messages == [
        "control.commands.pause.dest: status 'halted' is not a value of the document's status "
        "field (Counter.status)",
        "states.done.status: status 'finished' is not a value of the document's status field "
        "(Counter.status)",
    ]
    assert report.exit_code == 1


@pytest.mark.parametrize(
    ("storage", "said"),
    [
        pytest.param('{document: "../../{id}.json"}', "climbs out with '..'", id="dotdot"),
        pytest.param('{document: "a/../../{id}.json"}', "climbs out with '..'", id="inner-dotdot"),
        pytest.param('{document: "{id}.json", meta: "/tmp/{id}.fsm"}', "is absolute", id="abs"),
    ],
)
def test_storage_paths_out_of_the_workspace_are_errors(
    tmp_path: Path, storage: str, said: str
) -> None:
    """A storage path that `fsm new` would refuse (absolute, or climbing out with '..') is an
    error of `fsm check` already, at its line."""
    text = HEADER.replace('storage: {document: "{id}.json"}', f"storage: {storage}")
    report = check_text(tmp_path / "m", text + STATES + TRANSITIONS)
    found = [f for f in report.findings if f.check == "storage-outside"]
    assert len(found) == 1, report.findings
    assert found[0].level == "error"
    assert said in found[0].message
    assert found[0].path.endswith(":8")


def test_a_storage_path_inside_the_workspace_is_no_finding(tmp_path: Path) -> None:
    """Nested relative storage paths (and names with dots) are fine."""
    text = HEADER.replace(
        'storage: {document: "{id}.json"}', 'storage: {document: ".state/v1..x/{id}.json"}'
    )
    report = check_text(tmp_path / "m", text + STATES + TRANSITIONS)
    assert [f for f in report.findings if f.check == "storage-outside"] == []
