"""Coverage of a machine read from the journal as its instances write it: the counts, the reason
given for each edge not taken, and the diagram that draws them (fsm diagram --coverage)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsm.coverage.collect import Collector
from fsm.coverage.report import Threshold, below, full_report, machine_report, render_table
from fsm.model.machine import Machine, load_machine
from fsm.testing import Harness, MemoryStorage, Reply, ScriptedExecutor
from fsm.view.diagram import overlay_from_coverage, to_dot
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "examples" / "counter" / "machine.yaml"


@pytest.fixture
def collector() -> Iterator[Collector]:
    watching = Collector()
    watching.start()
    yield watching
    watching.stop()


@pytest.fixture
def counter() -> Machine:
    return load_machine(COUNTER)


def _report(collector: Collector, machine: Machine) -> dict[str, Any]:
    _, tally, _ = collector.machines[str(machine.path)]
    return machine_report(machine, tally)


def _edges(report: dict[str, Any]) -> dict[str, Any]:
    return {f"{e['source']}-{e['event']}": e.get("reason", e["count"]) for e in report["edges"]}


def test_a_run_counts_its_edges_guards_and_final_state(
    collector: Collector, counter: Machine, tmp_path: Path
) -> None:
    Harness(counter, tmp_path).create({"limit": 2}).run()
    report = _report(collector, counter)
    assert _edges(report) == {
        "idle-count": 1,
        "counting-count": 1,
        "counting-finish": 1,
        "idle-finish": "never tried in state idle: idle --count--> counting (#0) was always "
        "taken first (guard `below_limit` never false there)",
    }
    guards = {(g["source"], g["guard"]): (g["true"], g["false"]) for g in report["guards"]}
    assert guards == {
        ("idle", "below_limit"): (1, 0),
        ("counting", "below_limit"): (1, 1),
        ("idle", "not below_limit"): (0, 0),
        ("counting", "not below_limit"): (1, 0),
    }
    assert report["summary"]["guards"] == {"taken": 4, "declared": 8, "percent": 50.0}
    assert {f["state"]: f["count"] for f in report["finals"]} == {"done": 1, "failed": 0}


def test_an_instance_in_memory_counts_like_one_in_files(
    collector: Collector, counter: Machine
) -> None:
    with Harness(counter, storage=MemoryStorage()) as harness:
        harness.create({"limit": 0}).run()
    assert _edges(_report(collector, counter))["idle-finish"] == 1


def test_a_state_never_reached_is_the_reason(collector: Collector, counter: Machine) -> None:
    with Harness(counter) as harness:
        driver = harness.create({"limit": 1})
        driver.control("start")
        driver.control("stop")
    report = _report(collector, counter)
    assert _edges(report)["counting-finish"] == "state counting never reached"
    assert _edges(report)["idle-count"] == "no step ran in state idle"
    given = {(c["command"], c["from"]): c["count"] for c in report["control"]}
    assert given[("start", "created")] == given[("stop", "running")] == 1
    assert {f["state"]: f["count"] for f in report["finals"]} == {"done": 0, "failed": 1}


def test_a_guard_never_true_is_the_reason(collector: Collector, counter: Machine) -> None:
    with Harness(counter) as harness:
        harness.create({"limit": 1}).run()
    reason = _edges(_report(collector, counter))["counting-count"]
    assert reason == "guard `below_limit` was never true in state counting"


def test_the_threshold_names_each_kind_under_it(collector: Collector, counter: Machine) -> None:
    with Harness(counter) as harness:
        harness.create({"limit": 2}).run()
    report = full_report({"counter": _report(collector, counter)})
    failures = below(report, Threshold("edges:100,finals:100,guards:0"))
    assert failures[0] == "counter edges 75.0% < 100%"
    assert failures[1].startswith("  idle --finish--> done (#1): never tried in state idle")
    assert failures[2] == "counter finals 50.0% < 100%"
    assert below(report, Threshold("75")) == []
    table = render_table(report)
    assert table.splitlines()[2] == "counter    3/4             4/8      1/7     1/2       0  75.0%"


def test_the_diagram_draws_covered_and_uncovered_edges_apart(
    collector: Collector, counter: Machine, tmp_path: Path
) -> None:
    with Harness(counter) as harness:
        harness.create({"limit": 2}).run()
    report = full_report({"counter": _report(collector, counter)})
    (tmp_path / "cov.json").write_text(json.dumps(report))
    dot = to_dot(counter, run=overlay_from_coverage(counter, report))
    assert "tests took: edges 3/4, guards 4/8, control 1/7, finals 1/2" in dot
    # The shared transitions of idle and counting are one edge out of their box each: finish
    # was never taken from idle, so it is drawn red and dashed and says from where.
    finish = next(line for line in dot.splitlines() if 'id="t1"' in line)
    assert 'label="finish ×1 (never from idle)"' in finish
    assert 'color="#d32f2f"' in finish
    assert 'style="dashed"' in finish
    count = next(line for line in dot.splitlines() if 'id="t0"' in line)
    assert 'label="count ×2"' in count
    assert "#d32f2f" not in count
    pause = next(line for line in dot.splitlines() if 'id="c_pause_running"' in line)
    assert "pause ×0" in pause
    assert 'color="#d32f2f"' in pause
    assert dot == to_dot(counter, run=overlay_from_coverage(counter, report))  # deterministic


def test_fsm_diagram_coverage_writes_the_picture_and_refuses_a_bad_report(
    collector: Collector, counter: Machine, tmp_path: Path, cli: Cli
) -> None:
    with Harness(counter, tmp_path / "ws") as harness:
        harness.create({"limit": 2}).run()
    report = tmp_path / "cov.json"
    report.write_text(json.dumps(full_report({"counter": _report(collector, counter)})))
    done = cli("diagram", str(COUNTER), "--coverage", str(report), "-o", str(tmp_path / "c.dot"))
    assert done.code == 0, done.err
    assert "(never from idle)" in (tmp_path / "c.dot").read_text()
    missing = cli("diagram", str(COUNTER), "--coverage", str(tmp_path / "none.json"))
    assert missing.code != 0
    assert missing.err.strip().startswith("fsm: error: cannot read coverage report")
    assert len(missing.err.strip().splitlines()) == 1
    other = tmp_path / "other.json"
    other.write_text(json.dumps(full_report({})))
    refused = cli("diagram", str(COUNTER), "--coverage", str(other))
    assert "the coverage report has no machine 'counter' (it has: none)" in refused.err
    both = cli("diagram", str(COUNTER), "--coverage", str(report), "--run", "c1")
    assert "--run and --coverage draw different counts" in both.err


def test_fsm_coverage_joins_real_runs_with_the_tests_report(
    counter: Machine, tmp_path: Path, cli: Cli
) -> None:
    """Real runs finished two counters straight from idle; the test suite never did."""
    tests = Collector()
    tests.start()
    try:
        with Harness(counter) as harness:
            harness.create({"limit": 1}).run()
    finally:
        tests.stop()
    report = tmp_path / "tests.json"
    report.write_text(json.dumps(full_report({"counter": _report(tests, counter)})))
    harness = Harness(counter, tmp_path)
    for limit in (0, 0, 2):
        harness.create({"limit": limit}).run()
    alone = cli("coverage", str(COUNTER), "--journals")
    assert alone.code == 0, alone.err
    assert alone.out.splitlines() == [
        "counter: 3 instances; real runs took 4 of 4 declared edges",
        "  idle --finish--> done (#1): taken 2 times",
        "  counting --count--> counting (#0): taken 1 time",
        "  counting --finish--> done (#1): taken 1 time",
        "  idle --count--> counting (#0): taken 1 time",
    ]
    joined = cli("coverage", str(COUNTER), "--journals", str(tmp_path), "--tests", str(report))
    assert joined.out.splitlines() == [
        "counter: 3 instances; real runs took 4 of 4 declared edges",
        "edges real runs take that no test takes:",
        "  idle --finish--> done (#1): taken 2 times by real runs; no test takes it",
        "  counting --count--> counting (#0): taken 1 time by real runs; no test takes it",
    ]
    as_json = cli("coverage", str(COUNTER), "--journals", "--tests", str(report), "--json").json()
    assert as_json["untested"][0] == {"edge": "idle --finish--> done (#1)", "count": 2}
    assert as_json["production"]["summary"]["edges"]["taken"] == 4


def test_fsm_coverage_says_what_it_needs(tmp_path: Path, cli: Cli) -> None:
    bare = cli("coverage", str(COUNTER))
    assert bare.code != 0
    assert "give --journals [WORKSPACE]" in bare.err
    assert len(bare.err.strip().splitlines()) == 1
    nowhere = cli("coverage", str(COUNTER), "--journals", str(tmp_path / "missing"))
    assert "is not a folder" in nowhere.err


def test_a_copy_in_a_tests_folder_is_not_the_machine_named(
    collector: Collector, counter: Machine, tmp_path: Path
) -> None:
    """A test's copy of a machine is reported only when the machine named has no other
    definition; without names, no machine of the temporary folder is reported."""
    copy = tmp_path / "copy"
    shutil.copytree(COUNTER.parent, copy)
    review = tmp_path / "review"
    shutil.copytree(ROOT / "examples" / "review_queue" / "review_queue", review)
    (tmp_path / "a.py").write_text("x = 1\n")
    with Harness(counter) as harness:
        harness.create({"limit": 1}).run()
    Harness(load_machine(copy / "machine.yaml"), tmp_path / "c").create({"limit": 0}).run()
    harness = Harness(load_machine(review / "machine.yaml"), tmp_path, executor=ScriptedExecutor())
    harness.executor.on_agent(None, Reply(stdout="APPROVE"))
    harness.create({"files": ["a.py"]}).run()
    named = collector.report(["counter", "review-queue"])["machines"]
    assert sorted(named) == ["counter", "review-queue"]
    assert named["counter"]["path"] == str(COUNTER)
    assert named["review-queue"]["path"] == str(review / "machine.yaml")
    assert sorted(collector.report()["machines"]) == ["counter"]
