"""Generated paths (fsm test-paths, fsm.testing.paths): the search reaches every reachable edge
of the examples, names what it cannot reach, writes tests that pass, and those tests catch
planted mutants (a guard's comparison flipped, an action's update dropped)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from fsm.model.machine import load_machine
from fsm.testing.paths import Exploration, agent_says, explore, input_variants, write_tests
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "examples" / "counter"
REVIEW = ROOT / "examples" / "review_queue" / "review_queue"
REVIEW_INPUTS = [{"files": ["a.py"]}, {"files": ["a.py", "b.py"]}]
REVIEW_FILES = {"a.py": "x = 1\n", "b.py": "y = 2\n"}


def _explore_counter(folder: Path = COUNTER) -> Exploration:
    return explore(load_machine(folder / "machine.yaml"), seconds=30)


def _explore_review(folder: Path = REVIEW) -> Exploration:
    return explore(
        load_machine(folder / "machine.yaml"),
        inputs=REVIEW_INPUTS,
        files=REVIEW_FILES,
        answers=agent_says(["APPROVE", "CHANGES: add a test"]),
        seconds=30,
    )


def _run_generated(source: str, machine: Path) -> dict[str, str]:
    """Run every test of a generated module against ``machine``; test -> failure ('' passed)."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "generated.py", "exec"), namespace)
    namespace["MACHINE"] = str(machine)
    results = {}
    for name, test in namespace.items():
        if name.startswith("test_") and callable(test):
            try:
                test()
            except Exception as exc:
                results[name] = f"{type(exc).__name__}: {exc}"
            else:
                results[name] = ""
    return results


def test_the_counter_search_takes_every_edge_and_its_tests_pass() -> None:
    machine = load_machine(COUNTER / "machine.yaml")
    # The limit at its lower bound is what finishes a counter straight from idle.
    assert input_variants(machine) == [{}, {"limit": 0}]
    found = _explore_counter()
    assert found.missed() == []
    assert len(found.best) == 4
    assert not found.truncated
    source = write_tests(found, str(COUNTER / "machine.yaml"))
    assert "driver = h.create({'limit': 0})" in source
    compile(source, "generated.py", "exec")
    results = _run_generated(source, COUNTER / "machine.yaml")
    assert len(results) == 4 + len(found.control)
    assert all(not failure for failure in results.values()), results


def test_the_review_queue_search_names_the_edge_no_input_reaches() -> None:
    """A queue is created with at least one file: finishing straight from queued cannot be
    taken, and the search says which guard never held."""
    found = _explore_review()
    assert found.missed() == [
        "queued --finish--> done (#1): never tried in state queued: queued --review--> "
        "reviewing (#0) was always taken first (guard `has_pending` never false there)"
    ]
    assert {command for command, _ in found.control} == {"start", "pause", "resume", "stop"}
    source = write_tests(found, str(REVIEW / "machine.yaml"))
    assert "executor.on_agent(None, Reply(stdout='APPROVE'))" in source
    results = _run_generated(source, REVIEW / "machine.yaml")
    assert all(not failure for failure in results.values()), results


def test_edges_a_test_report_covers_are_left_out() -> None:
    found = _explore_counter()
    taken = sorted(found.best)
    source = write_tests(found, "counter", skip=taken[1:])
    assert source.count("def test_t") == 1


MUTANTS: list[tuple[str, str, str, str]] = [
    # (example, file, original text, mutant text)
    ("counter", "functions.py", "return doc.count < doc.limit", "return doc.count <= doc.limit"),
    ("counter", "functions.py", "return doc.count < doc.limit", "return doc.count > doc.limit"),
    ("counter", "functions.py", 'return {"count": doc.count + ctx.options.step_size}', "return {}"),
    (
        "counter",
        "functions.py",
        'return {"failure_reason": "Manually stopped by user"}',
        "return {}",
    ),
    ("review", "functions.py", "return bool(doc.pending())", "return not doc.pending()"),
    (
        "review",
        "functions.py",
        'return {"items": [reviewed if other is item else other for other in doc.items]}',
        "return {}",
    ),
    ("review", "functions.py", 'if last == "APPROVE":', 'if last != "APPROVE":'),
    ("review", "functions.py", "if not answer.ok:", "if answer.ok:"),
    ("review", "functions.py", 'return {"stop_reason": "stopped by the user"}', "return {}"),
    (
        "review",
        "functions.py",
        'if last.startswith("CHANGES:"):',
        'if not last.startswith("CHANGES:"):',
    ),
]


def test_planted_mutants_are_caught_by_the_generated_tests(tmp_path: Path) -> None:
    """Tests generated from each example, run against ten mutants of it: at least eight fail
    (the figure is printed; docs/testing-coverage.md reports it)."""
    generated = {
        "counter": write_tests(_explore_counter(), "unused"),
        "review": write_tests(_explore_review(), "unused"),
    }
    caught = []
    for number, (example, name, original, mutant) in enumerate(MUTANTS):
        folder = tmp_path / f"mutant{number}"
        shutil.copytree(COUNTER if example == "counter" else REVIEW, folder)
        code = (folder / name).read_text()
        assert original in code, (example, original)
        (folder / name).write_text(code.replace(original, mutant, 1))
        results = _run_generated(generated[example], folder / "machine.yaml")
        if any(results.values()):
            caught.append(number)
    print(f"mutants caught: {len(caught)} of {len(MUTANTS)}")
    assert len(caught) >= 8, [MUTANTS[n] for n in range(len(MUTANTS)) if n not in caught]


def test_fsm_test_paths_writes_the_module_and_says_what_it_missed(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "test_generated.py"
    done = cli(
        "test-paths",
        str(REVIEW / "machine.yaml"),
        "--out",
        str(out),
        "--inputs",
        '{"files": ["a.py"]}',
        "--file",
        "a.py=x = 1\\n",
        "--agent-says",
        "APPROVE",
        "--seconds",
        "20",
    )
    assert done.code == 0, done.err
    assert "def test_t0_queued_review_reviewing() -> None:" in out.read_text()
    assert "(h.root / 'a.py').write_text('x = 1\\n')" in out.read_text()
    lines = done.err.strip().splitlines()
    assert lines[0].startswith("fsm: 2 of 4 edges taken in ")
    assert "fsm: not reached: queued --finish--> done (#1)" in done.err
    refused = cli("test-paths", str(COUNTER / "machine.yaml"), "--inputs", "[1]")
    assert refused.code != 0
    assert refused.err.strip() == "fsm: error: --inputs '[1]' is not a JSON object"
