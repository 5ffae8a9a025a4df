"""pytest --fsm-cov: a test suite's coverage of a machine, read from the journals its instances
write, in any store and from ``fsm`` subprocesses, checked against an independent recount.

Each test runs a small suite of its own (the counter example, with known holes) in a pytest
subprocess, as a project using fsm would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "examples" / "counter" / "machine.yaml"

SUITE = """
import json, os, subprocess, sys
from pathlib import Path

from fsm.testing import Harness, MemoryStorage

MACHINE = {machine!r}
WORK = Path({work!r})


def test_counts_to_two_and_finishes():
    counter = Harness(MACHINE, WORK / "files").create({{"limit": 2}})
    assert counter.run().outcome == "completed"
    assert counter.doc.count == 2


def test_zero_limit_finishes_at_once_in_memory():
    counter = Harness(MACHINE, WORK / "memory", storage=MemoryStorage()).create({{"limit": 0}})
    counter.run()
    assert counter.state == "done"
    (WORK / "memory-journal.json").write_text(json.dumps(counter.journal()))


def test_stop_from_a_subprocess():
    cwd = WORK / "sub"
    cwd.mkdir(parents=True, exist_ok=True)
    fsm = [sys.executable, "-m", "fsm"]
    made = subprocess.run([*fsm, "new", MACHINE], cwd=cwd, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    stopped = subprocess.run(
        [*fsm, "stop", MACHINE, made.stdout.strip()], cwd=cwd, capture_output=True
    )
    assert stopped.returncode == 0
"""


def _run(tmp_path: Path, *args: str, ini: str = "") -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    (suite / "pytest.ini").write_text(f"[pytest]\n{ini}")
    (suite / "test_counter.py").write_text(SUITE.format(machine=str(COUNTER), work=str(work)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSM_COVERAGE")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=suite,
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _recount(work: Path) -> tuple[Counter[tuple[Any, ...]], Counter[tuple[Any, ...]], set[str]]:
    """Edges, guard results and control commands counted straight from the journals' lines."""
    records = [
        json.loads(line)
        for journal in work.rglob("journal.ndjson")
        for line in journal.read_text().splitlines()
    ]
    records += json.loads((work / "memory-journal.json").read_text())
    edges: Counter[tuple[Any, ...]] = Counter()
    guards: Counter[tuple[Any, ...]] = Counter()
    control = set()
    for record in records:
        if record["kind"] == "transition":
            edges[(record["source"], record["event"], record["dest"], record["transition"])] += 1
            for guard in record["guards"]:
                key = (record["source"], guard["transition"], guard["guard"], guard["result"])
                guards[key] += 1
        elif record["kind"] == "control":
            control.add(f"{record['event']}:{record['status_from']}")
    return edges, guards, control


def test_the_figures_match_a_recount_from_the_journals(tmp_path: Path) -> None:
    report_path = tmp_path / "cov.json"
    done = _run(tmp_path, "--fsm-cov=counter", f"--fsm-cov-report=json:{report_path}")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["formatVersion"] == 1
    counter = report["machines"]["counter"]
    edges, guards, control = _recount(tmp_path / "work")
    reported = {
        (e["source"], e["event"], e["dest"], e["transition"]): e["count"]
        for e in counter["edges"]
        if e["count"]
    }
    assert reported == dict(edges)
    for guard in counter["guards"]:
        key = (guard["source"], guard["transition"], guard["guard"])
        assert guard["true"] == guards[(*key, True)], key
        assert guard["false"] == guards[(*key, False)], key
    given = {f"{c['command']}:{c['from']}" for c in counter["control"] if c["count"]}
    # The harness starts the counters it runs; the stop was given by an `fsm stop` the suite ran
    # as a subprocess.
    assert given == control == {"start:created", "stop:created"}
    assert counter["summary"]["edges"] == {"taken": 4, "declared": 4, "percent": 100.0}
    assert {f["state"]: f["count"] for f in counter["finals"]} == {"done": 2, "failed": 1}


def test_deleting_the_only_test_of_an_edge_fails_the_threshold_and_names_the_edge(
    tmp_path: Path,
) -> None:
    whole = _run(tmp_path, "--fsm-cov=counter", "--fsm-cov-fail-under=100")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "Required fsm machine coverage reached." in whole.stdout
    # The in-memory test is the only one that finishes a counter straight from idle.
    less = _run(tmp_path, "--fsm-cov=counter", "--fsm-cov-fail-under=100", "-k", "not memory")
    assert less.returncode == 1, less.stdout + less.stderr
    assert "2 passed" in less.stdout
    assert "counter edges 75.0% < 100%" in less.stdout
    assert (
        "idle --finish--> done (#1): never tried in state idle: idle --count--> counting (#0) "
        "was always taken first (guard `below_limit` never false there)" in less.stdout
    )


def test_guard_outcomes_and_control_thresholds_are_separate(tmp_path: Path) -> None:
    done = _run(
        tmp_path, "--fsm-cov=counter", "--fsm-cov-fail-under=edges:100,control:50", "-k", "two"
    )
    assert done.returncode == 1
    assert "counter edges 75.0% < 100%" in done.stdout
    assert "counter control 14.3% < 50%" in done.stdout
    # The table says what was taken of what was declared, kind by kind.
    assert "counter    3/4             4/8      1/7     1/2       0  75.0%" in done.stdout
    assert "guard `not below_limit` at idle --finish--> (#1): never evaluated" in done.stdout
    assert "control stop from status created: never given" in done.stdout
    assert "final state failed: never reached" in done.stdout


def test_a_threshold_per_machine_from_the_configuration(tmp_path: Path) -> None:
    """Only the machines a session touched are held to their line (a run of a few tests does
    not fail for a machine it never created)."""
    ini = "fsm_cov_fail_under =\n    counter edges:100\n    ccw-loop edges:100,guards:100\n"
    done = _run(tmp_path, "--fsm-cov", "-k", "two", ini=ini)
    assert done.returncode == 1, done.stdout + done.stderr
    failures = done.stdout.split("FAIL Required fsm machine coverage not reached:")[1]
    assert "counter edges 75.0% < 100%" in failures
    assert "ccw-loop" not in failures
    off = _run(tmp_path, "-k", "two", ini=ini)
    assert off.returncode == 0
    assert "fsm machine coverage" not in off.stdout


def test_a_bad_option_is_one_line_and_a_usage_error(tmp_path: Path) -> None:
    done = _run(tmp_path, "--fsm-cov", "--fsm-cov-fail-under=branches:3")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "unknown coverage kind 'branches'" in done.stderr
    assert "Traceback" not in done.stderr


def test_off_it_watches_nothing_and_sets_nothing(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_off.py").write_text(
        "import os\n"
        "from fsm.engine import observe\n"
        "def test_off():\n"
        "    assert not observe.watching()\n"
        "    assert observe.RECORDS_FILE not in os.environ\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
        cwd=suite,
        check=False,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("FSM_COVERAGE")},
    )
    assert done.returncode == 0, done.stdout
    assert "fsm machine coverage" not in done.stdout
