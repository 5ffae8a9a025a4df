"""The replay of decisions: journals of real runs fed to a changed definition.

The ccw-loop journals in tests/journals/ccw-loop are real runs (scripts/decision-fixtures.sh
regenerates them); the counter tests make their own journals and change the definition or a
guard's code in a copy of the machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fsm.model import discovery
from fsm.testing import export_journals, replay_decisions
from tests.conftest import ENGINE_MACHINES, Cli

CCW_MACHINE = Path(__file__).parent.parent / "machines" / "ccw_loop" / "machine.yaml"
CCW_JOURNALS = Path(__file__).parent / "journals" / "ccw-loop"
AUTO_GUARDS = "guards: [within_iteration_budget, within_error_budget, {}]"


def ccw_variant(tmp_path: Path, name: str, change: dict[str, str]) -> Path:
    """A copy of ccw-loop's machine file with ``change`` (old text: new text) made at once."""
    text = CCW_MACHINE.read_text()
    marks = {old: f"@@{n}@@" for n, old in enumerate(change)}
    for old, mark in marks.items():
        assert old in text, old
        text = text.replace(old, mark)
    for old, mark in marks.items():
        text = text.replace(mark, change[old])
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_the_unchanged_definition_decides_every_recorded_step_alike() -> None:
    report = replay_decisions("ccw-loop", CCW_JOURNALS)
    assert len(report.journals) == 4
    assert report.steps == 24
    assert [j.name for j in report.diverged] == []
    assert all(not j.undecidable for j in report.journals)
    report.assert_same()


def test_swapped_transitions_name_each_journals_first_divergent_step_and_guard(
    tmp_path: Path,
) -> None:
    """develop's and validate's guard lists swapped: every journal diverges where it first
    developed, the candidate validating on the guard that made the recorded step develop."""
    swapped = ccw_variant(
        tmp_path,
        "swapped",
        {
            AUTO_GUARDS.format("develop_due"): AUTO_GUARDS.format("validation_due"),
            AUTO_GUARDS.format("validation_due"): AUTO_GUARDS.format("develop_due"),
        },
    )
    report = replay_decisions("ccw-loop", CCW_JOURNALS, definition=swapped)
    assert sorted(j.name for j in report.diverged) == ["aborted", "fixed", "handed", "passes"]
    for journal in report.diverged:
        divergence = journal.divergence
        assert divergence is not None
        assert (divergence.step, divergence.line, divergence.state) == (2, 4, "init")
        assert divergence.recorded.text("init").startswith("develop: init -> develop")
        assert divergence.candidate.text("init").startswith("validate: init -> validate")
        assert "develop_due=T" in divergence.candidate.text("init")
    with pytest.raises(AssertionError, match="step 2 \\(journal line 4\\), state init"):
        report.assert_same()


def test_reordered_exclusive_transitions_decide_alike_from_the_observed_reads(
    tmp_path: Path,
) -> None:
    """develop moved before abort: where the recorded step took abort, develop's guards were
    never evaluated; the replay evaluates them on the rebuilt document with the task list and
    attempt reads the step observed, and finds the same decisions, none undecidable."""
    text = CCW_MACHINE.read_text()
    abort = text[
        text.index("  - event: abort\n    source: [init") : text.index("  - event: abandon")
    ]
    develop = text[
        text.index("  - event: develop\n    source: [init") : text.index("  - event: fix\n")
    ]
    reordered = ccw_variant(tmp_path, "reordered", {abort: develop, develop: abort})
    report = replay_decisions("ccw-loop", CCW_JOURNALS, definition=reordered)
    assert report.diverged == []
    assert all(not j.undecidable for j in report.journals), report.lines()
    # Without the observations the same steps cannot be decided: reported so, never diverging.
    bare = tmp_path / "bare"
    bare.mkdir()
    for file in CCW_JOURNALS.glob("*.ndjson"):
        lines = [json.loads(line) for line in file.read_text().splitlines()]
        for record in lines:
            record.pop("observed", None)
        (bare / file.name).write_text("".join(json.dumps(r) + "\n" for r in lines))
    blind = replay_decisions("ccw-loop", bare, definition=reordered)
    assert blind.diverged == []
    undecided = [why for j in blind.journals for _, why in j.undecidable]
    assert undecided and all("observed no 'waiting_tasks'" in why for why in undecided)


# --- the counter, through the command line ---------------------------------------------------


@pytest.fixture
def counter_file(tmp_path: Path) -> Path:
    shutil.copytree(ENGINE_MACHINES / "counter", tmp_path / "m")
    return tmp_path / "m" / "machine.yaml"


def candidate(tmp_path: Path, guard_body: str) -> Path:
    """A copy of the counter (machine file and module) whose below_limit returns
    ``guard_body``."""
    shutil.copytree(tmp_path / "m", tmp_path / "c")
    module = tmp_path / "c" / "functions.py"
    text = module.read_text()
    assert "    return doc.count < doc.limit\n" in text
    module.write_text(
        text.replace("    return doc.count < doc.limit\n", f"    return {guard_body}\n")
    )
    return tmp_path / "c" / "machine.yaml"


def runs(cli: Cli, machine: Path) -> None:
    """Three counters of limit 3: one done, one mid-way, one created."""
    for instance_id in ("c1", "c2", "c3"):
        assert cli("new", str(machine), "--id", instance_id, "--set", "limit=3").code == 0
    assert cli("run", str(machine), "c1", "--quiet").code == 0
    assert cli("run", str(machine), "c2", "--max-steps", "2", "--quiet").code == 5


def test_a_changed_guard_is_evaluated_and_named_with_its_values(
    cli: Cli, counter_file: Path, tmp_path: Path
) -> None:
    runs(cli, counter_file)
    same = cli("replay", str(counter_file), "--decisions")
    assert same.code == 0, same.err
    assert "3 journals, 6 steps: 3 same, 0 diverge" in same.out
    changed = candidate(tmp_path, "doc.count < doc.limit - 1")
    result = cli("replay", str(counter_file), "--decisions", "--definition", str(changed))
    assert result.code == 1
    assert "c1: step 3 (journal line 5), state counting" in result.out
    assert "recorded:  count: counting -> counting  below_limit=T" in result.out
    assert "candidate: finish: counting -> done  not below_limit=T (evaluated)" in result.out
    assert "flipped:   below_limit T -> F" in result.out
    # c2 (count 2 of 3) would now finish instead of counting on.
    assert "forecast: c2 in state counting: now count -> counting; under the candidate " in (
        result.out
    )
    assert "finish -> done" in result.out


def test_a_guard_reading_around_observe_is_undecidable_not_divergent(
    cli: Cli, counter_file: Path, tmp_path: Path
) -> None:
    runs(cli, counter_file)
    changed = candidate(tmp_path, "(ctx.workspace / 'limit.txt').read_text() == 'go'")
    result = cli("replay", str(counter_file), "--decisions", "--definition", str(changed))
    assert "0 diverge" in result.out
    assert "undecidable: guard below_limit failed when evaluated: FileNotFoundError" in result.out


def test_journals_exported_as_fixtures_replay_across_a_migration(
    cli: Cli, counter_file: Path, tmp_path: Path
) -> None:
    """Fixtures exported from a workspace replay against a later version that renamed a state:
    the recorded names are read through its migrations."""
    runs(cli, counter_file)
    written = export_journals(tmp_path, str(counter_file), tmp_path / "fixtures")
    assert sorted(p.name for p in written) == ["c1.ndjson", "c2.ndjson", "c3.ndjson"]
    v2 = counter_file.read_text().replace("counting", "tally").replace("version: 1", "version: 2")
    counter_file.write_text(v2 + "migrations:\n  - {from: 1, states: {counting: tally}}\n")
    discovery._CACHE.clear()
    report = replay_decisions(counter_file, tmp_path / "fixtures")
    assert report.steps == 6
    report.assert_same()


def test_a_changed_guard_sees_the_options_the_run_recorded(
    cli: Cli, counter_file: Path, tmp_path: Path
) -> None:
    """Counters run with step_size 2 (an option): a changed guard reading the option is
    evaluated with the recorded value, not the workspace's default of 1."""
    for instance_id in ("c1", "c2"):
        assert cli("new", str(counter_file), "--id", instance_id, "--set", "limit=4").code == 0
        assert cli("-o", "step_size=2", "run", str(counter_file), instance_id, "-q").code == 0
    first_step = next(r for r in journal_of(tmp_path, "c1") if r["kind"] == "transition")
    assert first_step["options"]["step_size"] == 2
    changed = candidate(tmp_path, "doc.count < doc.limit and ctx.options.step_size == 2")
    result = cli("replay", str(counter_file), "--decisions", "--definition", str(changed))
    assert result.code == 0, result.out
    assert "2 journals, 6 steps: 2 same, 0 diverge" in result.out


def journal_of(tmp_path: Path, instance_id: str) -> list[dict[str, object]]:
    text = (tmp_path / ".counters" / f"{instance_id}.fsm" / "journal.ndjson").read_text()
    return [json.loads(line) for line in text.splitlines()]
