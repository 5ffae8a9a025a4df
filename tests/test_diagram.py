"""Diagrams: the model of a machine, DOT and Mermaid text, images, files, and run overlays."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fsm.base.errors import FsmError, InputError
from fsm.model.machine import Machine, load_machine
from fsm.model.records import ControlRecord, CreateRecord, ErrorRecord, Record, TransitionRecord
from fsm.view.diagram import (
    DiagramRenderError,
    RunOverlay,
    diagram_model,
    overlay_from_journal,
    render,
    to_dot,
    to_mermaid,
    write_diagrams,
)

COUNTER_DIR = Path(__file__).parent / "engine_machines" / "counter"
COUNTER_STATES = ("idle", "counting", "done", "failed")
COUNTER_EVENTS = ("abort", "count", "finish", "spoil")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CONTROL_COLOR = 'color="#1f5fbf"'
DIMMED = 'color="#b0b0b0"'

ODD_NAMES_YAML = r"""
name: odd-names
version: 2
description: 'Quotes " and \ backslashes: colons; semicolons # hashes'
module: functions.py
document: Counter
options: CounterOptions
state: {field: phase}
initial: wait-here
storage: {document: "odd/{id}.json"}
states:
  wait-here: {description: 'Says "hi" \ then: waits; # really'}
  state: {description: A Mermaid keyword as a state name.}
  end: {description: Finished., final: true, tags: [success]}
transitions:
  - {event: go, source: wait-here, dest: state, description: 'Go: now.'}
  - {event: finish, source: state, dest: end, description: Done.}
"""


@pytest.fixture(scope="module")
def counter() -> Machine:
    return load_machine(COUNTER_DIR / "machine.yaml")


@pytest.fixture
def odd_names(tmp_path: Path) -> Machine:
    folder = tmp_path / "odd"
    folder.mkdir()
    shutil.copy(COUNTER_DIR / "functions.py", folder / "functions.py")
    (folder / "machine.yaml").write_text(ODD_NAMES_YAML, encoding="utf-8")
    return load_machine(folder / "machine.yaml")


def dot_line(dot: str, start: str) -> str:
    """The one DOT line that starts (after indentation) with ``start``."""
    found = [line.strip() for line in dot.splitlines() if line.strip().startswith(start)]
    assert len(found) == 1, f"expected one line starting with {start!r}, got {found}"
    return found[0]


def attr(line: str, key: str) -> str:
    """The value of ``key="..."`` on a DOT line, unescaped and stripped of padding."""
    found = re.search(rf'\b{key}="((?:[^"\\]|\\.)*)"', line)
    assert found is not None, f"no {key} on {line}"
    return found.group(1).replace('\\"', '"').strip()


def edge_line(dot: str, edge_id: str) -> str:
    """The DOT line of the edge with ``id="<edge_id>"``."""
    found = [line.strip() for line in dot.splitlines() if f'id="{edge_id}"' in line]
    assert len(found) == 1, f"expected one edge {edge_id}, got {found}"
    return found[0]


# --- the model -------------------------------------------------------------------------------


def test_model_has_one_work_edge_per_transition_source(counter: Machine) -> None:
    """Each transition becomes one edge per source state; ``dest: "="`` becomes a self-loop."""
    edges = {(e.source, e.dest, e.event) for e in diagram_model(counter).work_edges()}
    assert edges == {
        ("idle", "failed", "abort"),
        ("counting", "failed", "abort"),
        ("idle", "counting", "count"),
        ("counting", "counting", "count"),
        ("idle", "done", "finish"),
        ("counting", "done", "finish"),
        ("counting", "counting", "spoil"),
    }


def test_model_flags_initial_final_success_and_failure(counter: Machine) -> None:
    """Nodes carry the initial, final, success and failure flags of their states."""
    nodes = {node.name: node for node in diagram_model(counter).nodes}
    assert [name for name, n in nodes.items() if n.initial] == ["idle"]
    assert [name for name, n in nodes.items() if n.final] == ["done", "failed"]
    assert (nodes["done"].success, nodes["done"].failure) == (True, False)
    assert (nodes["failed"].success, nodes["failed"].failure) == (False, True)
    assert nodes["idle"].description == "Not counted yet."


def test_model_draws_state_moving_control_commands_once(counter: Machine) -> None:
    """Only ``stop`` (which has ``state:``) reaches an FSM state, through one edge from anywhere."""
    model = diagram_model(counter)
    into_states = [e for e in model.edges if e.kind == "control" and e.layer == "state"]
    assert [(e.source, e.dest, e.event) for e in into_states] == [(None, "failed", "stop")]
    assert model.statuses == ("created", "paused", "running", "failed")


# --- DOT -------------------------------------------------------------------------------------


def test_dot_is_deterministic(counter: Machine) -> None:
    """Two renderings of the same machine, even loaded anew, give identical DOT text."""
    again = load_machine(COUNTER_DIR / "machine.yaml")
    assert to_dot(counter) == to_dot(again)
    assert to_dot(counter) == to_dot(counter)


@pytest.mark.parametrize("word", COUNTER_STATES + COUNTER_EVENTS)
def test_dot_shows_every_state_and_event(counter: Machine, word: str) -> None:
    """Every state is a node and every transition event labels an edge."""
    dot = to_dot(counter)
    if word in COUNTER_STATES:
        assert f'tooltip="{counter.states[word].description}"' in dot_line(dot, f'"{word}" [')
    else:
        assert re.search(rf'label="{word}( \[| \(|")', dot)


def test_dot_labels_edges_with_event_and_keeps_guards_in_tooltips(counter: Machine) -> None:
    """Edge labels are the event alone; the tooltip reads ``event [guard]: description``, with
    negated guards as ``not guard``."""
    dot = to_dot(counter)
    finish = edge_line(dot, "t2")
    assert attr(finish, "label") == "finish"
    assert attr(finish, "tooltip") == "finish [not below_limit]: The limit is reached."
    assert attr(finish, "labeltooltip") == attr(finish, "tooltip")
    assert attr(edge_line(dot, "t1"), "tooltip").startswith("count [below_limit]: ")


def test_dot_marks_initial_state_and_graph_label(counter: Machine) -> None:
    """A point node points at the initial state; the graph is labelled with name and description."""
    dot = to_dot(counter)
    assert "shape=point" in dot_line(dot, "_initial [")
    assert dot_line(dot, "_initial ->") == '_initial -> "idle";'
    assert "counter (v1)\\nCounts up to a limit" in dot.splitlines()[1]


@pytest.mark.parametrize(
    ("state", "expected", "absent"),
    [
        pytest.param("done", ['peripheries="2"', 'fillcolor="#dff5e1"'], [], id="success-final"),
        pytest.param("failed", ['peripheries="2"', 'fillcolor="#fbe0e0"'], [], id="failure-final"),
        pytest.param(
            "idle", ['fillcolor="white"'], ["peripheries", "#dff5e1", "#fbe0e0"], id="ordinary"
        ),
    ],
)
def test_dot_styles_final_states(
    counter: Machine, state: str, expected: list[str], absent: list[str]
) -> None:
    """Final states have a double border; success is green, failure red, others plain."""
    line = dot_line(to_dot(counter), f'"{state}" [')
    assert all(text in line for text in expected), line
    assert not any(text in line for text in absent), line


def test_dot_draws_control_edges_dashed_and_apart(counter: Machine) -> None:
    """Control edges are dashed and blue; no work edge is; stop reaches ``failed`` from the box."""
    dot = to_dot(counter)
    control = [line for line in dot.splitlines() if 'id="c_' in line]
    work = [line for line in dot.splitlines() if 'id="t' in line]
    assert len(control) == 8
    assert all('style="dashed"' in line and CONTROL_COLOR in line for line in control)
    assert not any("dashed" in line or CONTROL_COLOR in line for line in work)
    stop = edge_line(dot, "c_stop")
    assert '-> "failed"' in stop
    assert 'ltail="cluster_control"' in stop
    assert "subgraph cluster_control {" in dot


def test_dot_styles_manual_transitions(counter: Machine) -> None:
    """A transition with ``auto: false`` is dotted, and its tooltip says ``(manual)``."""
    line = edge_line(to_dot(counter), "t3_counting")
    assert attr(line, "label") == "spoil"
    assert attr(line, "tooltip").startswith("spoil (manual): ")
    assert 'style="dotted"' in line


def test_dot_escapes_quotes_and_backslashes(odd_names: Machine) -> None:
    """Quotes and backslashes in descriptions are escaped, so Graphviz still parses the text."""
    dot = to_dot(odd_names)
    assert 'tooltip="Says \\"hi\\" \\\\ then: waits; # really"' in dot_line(dot, '"wait-here" [')
    assert render(dot, "svg").lstrip().startswith(b"<?xml")


# --- Mermaid ---------------------------------------------------------------------------------


@pytest.mark.parametrize("word", COUNTER_STATES + COUNTER_EVENTS)
def test_mermaid_shows_every_state_and_event(counter: Machine, word: str) -> None:
    """Every state has a description line and every event labels a transition."""
    mermaid = to_mermaid(counter)
    if word in COUNTER_STATES:
        assert f"    {word} : {counter.states[word].description}\n" in mermaid
    else:
        assert re.search(rf" --> \w+ : {word}\b", mermaid)


def test_mermaid_marks_initial_final_and_styles(counter: Machine) -> None:
    """The initial arrow, final arrows, success/failure classes and the control box are there."""
    mermaid = to_mermaid(counter)
    assert mermaid.startswith('---\ntitle: "counter (v1): Counts up to a limit')
    assert "stateDiagram-v2\n" in mermaid
    assert "    [*] --> idle\n" in mermaid
    assert "    done --> [*]\n    failed --> [*]\n" in mermaid
    assert "    class done success\n" in mermaid
    assert "    class failed failure\n" in mermaid
    assert "    control --> failed : stop (control, from any state)\n" in mermaid
    assert "        status_running --> status_paused : pause\n" in mermaid


def test_mermaid_ids_and_text_are_safe(odd_names: Machine) -> None:
    """Dashed and keyword names get safe ids; label text never carries a bare ``:`` or ``;``."""
    mermaid = to_mermaid(odd_names)
    assert '    state "wait-here" as wait_here\n' in mermaid
    assert "    [*] --> wait_here\n" in mermaid
    assert "    wait_here --> s_state : go\n" in mermaid
    assert "    s_end --> [*]\n" in mermaid
    for line in mermaid.splitlines():
        if " : " in line:
            text = line.split(" : ", 1)[1]
            assert not re.search(r'[:"]|;(?<!#\d\d;)', text.replace("#35;", "")), line


# --- images and files ------------------------------------------------------------------------


@pytest.fixture
def no_dot_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("dot") is None


@pytest.mark.usefixtures("no_dot_on_path")
@pytest.mark.parametrize(
    ("fmt", "looks_right"),
    [
        pytest.param("svg", lambda data: data.lstrip().startswith(b"<?xml"), id="svg"),
        pytest.param("png", lambda data: data.startswith(PNG_SIGNATURE), id="png"),
    ],
)
def test_render_needs_no_system_dot(counter: Machine, fmt: Any, looks_right: Any) -> None:
    """SVG and PNG are drawn in-process even when no ``dot`` program is on PATH."""
    assert looks_right(render(to_dot(counter), fmt))


def test_render_reports_graphviz_failure() -> None:
    """DOT that Graphviz cannot parse gives a DiagramRenderError, not a raw pygraphviz error."""
    with pytest.raises(DiagramRenderError, match="cannot render svg: Graphviz failed"):
        render("digraph { this is not dot", "svg")


def test_render_reports_missing_pygraphviz(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pygraphviz, render raises an FsmError that says what is missing."""
    monkeypatch.setitem(sys.modules, "pygraphviz", None)
    with pytest.raises(DiagramRenderError, match="pygraphviz is not importable") as caught:
        render("digraph { a -> b }", "png")
    assert isinstance(caught.value, FsmError)


def test_write_diagrams_writes_every_format(counter: Machine, tmp_path: Path) -> None:
    """All four files are written (stale content replaced); the DOT file is exactly to_dot."""
    out = tmp_path / "diagrams"
    out.mkdir()
    (out / "counter.dot").write_text("stale", encoding="utf-8")
    report = write_diagrams(counter, out)
    assert report.written == [out / f"counter.{fmt}" for fmt in ("dot", "svg", "png", "mmd")]
    assert report.skipped == []
    assert (out / "counter.dot").read_text(encoding="utf-8") == to_dot(counter)
    assert (out / "counter.mmd").read_text(encoding="utf-8") == to_mermaid(counter)
    assert (out / "counter.png").read_bytes().startswith(PNG_SIGNATURE)


def test_write_diagrams_without_pygraphviz_keeps_text(
    counter: Machine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When images cannot be rendered, DOT and Mermaid are still written and images reported."""
    monkeypatch.setitem(sys.modules, "pygraphviz", None)
    report = write_diagrams(counter, tmp_path)
    assert report.written == [tmp_path / "counter.dot", tmp_path / "counter.mmd"]
    assert [fmt for fmt, _ in report.skipped] == ["svg", "png"]
    assert all("pygraphviz is not importable" in reason for _, reason in report.skipped)
    assert not (tmp_path / "counter.svg").exists()


@pytest.mark.parametrize(
    "formats",
    [pytest.param(["pdf"], id="unknown"), pytest.param(["dot", "jpg"], id="one-unknown")],
)
def test_write_diagrams_refuses_unknown_formats(
    counter: Machine, tmp_path: Path, formats: list[str]
) -> None:
    """An unknown format is bad input, refused before any file is written."""
    with pytest.raises(InputError, match="unknown diagram format"):
        write_diagrams(counter, tmp_path / "out", formats)
    assert not (tmp_path / "out").exists()


def test_import_does_not_load_pygraphviz() -> None:
    """Importing fsm.view.diagram leaves pygraphviz unloaded, so commands that never draw stay
    fast."""
    code = "import sys, fsm.view.diagram; print('pygraphviz' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# --- run overlays ----------------------------------------------------------------------------


def control(command: str, source: str, dest: str, status_from: str) -> ControlRecord:
    """A control record with the fields the overlay reads."""
    return ControlRecord(
        event=command, source=source, dest=dest, status_from=status_from, status_to=None
    )


def step(event: str, source: str, dest: str, transition: int) -> TransitionRecord:
    """A transition record with the fields the overlay reads."""
    return TransitionRecord(event=event, source=source, dest=dest, transition=transition)


JOURNAL: list[Record] = [
    CreateRecord(dest="idle"),
    control("start", "idle", "idle", "created"),
    step("count", "idle", "counting", 1),
    step("count", "counting", "counting", 1),
    ErrorRecord(
        event="count", source="counting", dest="counting", transition=1, action="a", error="e"
    ),
    control("pause", "counting", "counting", "running"),
    control("resume", "counting", "counting", "paused"),
    step("finish", "counting", "done", 2),
]


def test_overlay_counts_journal_records() -> None:
    """Creates, transitions and state-moving controls count visits; errors and pauses do not."""
    overlay = overlay_from_journal(JOURNAL, "done")
    assert overlay.current_state == "done"
    assert overlay.state_visits == {"idle": 1, "counting": 2, "done": 1}
    assert overlay.edge_visits == {1: 2, 2: 1}
    assert overlay.edge_source_visits == {(1, "idle"): 1, (1, "counting"): 1, (2, "counting"): 1}
    assert overlay.control_visits == {"start": 1, "pause": 1, "resume": 1}


def test_overlay_counts_a_stop_as_a_visit() -> None:
    """A control command that moves the state (stop -> failed) counts a visit of that state."""
    stop = control("stop", "counting", "failed", "running")
    records = [*JOURNAL[:4], stop]
    overlay = overlay_from_journal(records, "failed")
    assert overlay.state_visits["failed"] == 1
    assert overlay.control_visits["stop"] == 1


def test_dot_overlay_highlights_counts_and_dims(counter: Machine) -> None:
    """The current state is bold and filled; states and edges show counts; untaken ones are grey."""
    dot = to_dot(counter, run=overlay_from_journal(JOURNAL, "done"))
    current = dot_line(dot, '"done" [')
    assert 'label="done\\n×1"' in current
    assert "bold" in current
    assert 'fillcolor="#ffd54f"' in current
    assert 'label="counting\\n×2"' in dot_line(dot, '"counting" [')
    assert "bold" not in dot_line(dot, '"counting" [')
    assert 'label="failed\\n×0"' in dot_line(dot, '"failed" [')
    taken = {
        "t1": 2,
        "t2": 1,
        "c_start_created": 1,
        "c_pause_running": 1,
        "c_resume_paused": 1,
    }
    for edge_id in (
        "t0",
        "t1",
        "t2",
        "t3_counting",
        "c_start_created",
        "c_start_paused",
        "c_pause_running",
        "c_resume_paused",
        "c_stop",
    ):
        line = edge_line(dot, edge_id)
        count = taken.get(edge_id, 0)
        assert attr(line, "label").endswith(f" ×{count}"), line
        assert (DIMMED in line) == (count == 0), line


def test_overlay_without_per_source_counts_uses_totals(counter: Machine) -> None:
    """An overlay built by hand with only per-transition totals shows them on every edge."""
    overlay = RunOverlay("counting", {"counting": 3}, {1: 3, 3: 2}, {"stop": 0})
    dot = to_dot(counter, run=overlay)
    assert attr(edge_line(dot, "t1"), "label") == "count ×3"
    assert attr(edge_line(dot, "t3_counting"), "label") == "spoil ×2"
    assert DIMMED in edge_line(dot, "c_stop")


def test_overlay_counts_match_a_real_run(counter: Machine, tmp_path: Path) -> None:
    """A run's journal gives the counts a person expects: each step once, on its own edge."""
    from fsm.base.clock import SimulatedClock
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Workspace

    workspace = Workspace(tmp_path, clock=SimulatedClock(tick=0.001))
    instance = workspace.instance(counter, "run1")
    instance.create({"limit": 3})
    result = Engine(instance).run()
    assert result.state == "done"
    overlay = overlay_from_journal(instance.journal.records(), result.state)
    count = next(t.index for t in counter.transitions if t.event == "count")
    finish = next(t.index for t in counter.transitions if t.event == "finish")
    assert overlay.state_visits == {"idle": 1, "counting": 3, "done": 1}
    assert overlay.edge_source_visits == {
        (count, "idle"): 1,
        (count, "counting"): 2,
        (finish, "counting"): 1,
    }
    assert overlay.control_visits == {"start": 1}
    dot = to_dot(counter, run=overlay)
    assert "×3" in dot  # counting was visited three times
