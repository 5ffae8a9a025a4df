"""Machines that change while their instances run: identity, refusals, migrations, checks.

Each test copies the engine's counter machine into the workspace, runs instances under it,
edits the machine file as an author would, and drives the CLI against the edited file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fsm.model import discovery
from fsm.model.definition import parse_definition
from fsm.model.identity import graph_digest
from tests.conftest import ENGINE_MACHINES, Cli

MIGRATION_1_TO_2 = "migrations:\n  - {from: 1, states: {counting: tally}}\n"


@pytest.fixture
def machine_file(tmp_path: Path) -> Path:
    """A copy of the counter machine in the workspace (``m/machine.yaml``)."""
    shutil.copytree(ENGINE_MACHINES / "counter", tmp_path / "m")
    return tmp_path / "m" / "machine.yaml"


def edit(path: Path, *, old: str, new: str, version: int | None = None, add: str = "") -> None:
    """Replace ``old`` by ``new`` everywhere in the machine file, set its version, append."""
    text = path.read_text().replace(old, new)
    if version is not None:
        text = text.replace("version: 1\n", f"version: {version}\n", 1)
    path.write_text(text + add)
    discovery._CACHE.clear()  # the CLI runs in this process: load the edited file


def started(cli: Cli, machine: Path, instance_id: str, steps: int) -> None:
    """A counter instance created and run ``steps`` steps (limit 5)."""
    assert cli("new", str(machine), "--id", instance_id, "--set", "limit=5").code == 0
    if steps:
        result = cli("run", str(machine), instance_id, "--max-steps", str(steps), "--quiet")
        assert result.code == 5, result.err  # the step limit


def journal(tmp_path: Path, instance_id: str) -> list[dict[str, object]]:
    lines = (tmp_path / ".counters" / f"{instance_id}.fsm" / "journal.ndjson").read_text()
    return [json.loads(line) for line in lines.splitlines()]


def digest(text: str) -> str:
    spec, _, problems = parse_definition(text)
    assert spec is not None, problems
    return graph_digest(spec)


# --- identity -------------------------------------------------------------------------------


def test_descriptions_and_comments_keep_the_graph_digest_and_structure_changes_it(
    machine_file: Path,
) -> None:
    """Editing a description or a comment keeps the digest; renaming a state, reordering
    transitions or changing a guard list changes it."""
    text = machine_file.read_text()
    base = digest(text)
    described = text.replace("Counting up.", "Counting up by one.")
    commented = text.replace("transitions:\n", "# the steps\ntransitions:\n")
    assert digest(described) == base
    assert digest(commented) == base
    assert digest(text.replace("version: 1\n", "version: 7\n")) == base
    assert digest(text.replace("counting", "tally")) != base
    assert digest(text.replace("guards: [below_limit]", "guards: []")) != base
    abort, rest = text.split("  - event: count\n", 1)
    head, _, abort_block = abort.partition("transitions:\n")
    reordered = f"{head}transitions:\n  - event: count\n{rest}{abort_block}"
    assert digest(reordered) != base


def test_the_create_record_names_the_definition_and_a_snapshot_is_kept(
    cli: Cli, machine_file: Path, tmp_path: Path
) -> None:
    """The first record carries version, graph and code digests; the machine file's text is
    kept under its graph digest beside the journals."""
    started(cli, machine_file, "c1", 0)
    definition = journal(tmp_path, "c1")[0]["definition"]
    assert isinstance(definition, dict)
    assert definition["version"] == 1
    assert definition["graph"] == digest(machine_file.read_text())
    assert isinstance(definition["code"], str) and len(definition["code"]) == 16
    kept = tmp_path / ".counters" / ".fsm-definitions" / f"counter-{definition['graph']}.yaml"
    assert kept.read_text() == machine_file.read_text()


# --- running a changed machine ----------------------------------------------------------------


def test_a_renamed_state_and_a_new_version_without_migration_is_refused(
    cli: Cli, machine_file: Path, tmp_path: Path
) -> None:
    """One line naming both versions and what to do, exit 2, nothing written."""
    started(cli, machine_file, "c1", 2)
    document = (tmp_path / ".counters" / "c1.json").read_bytes()
    records = len(journal(tmp_path, "c1"))
    edit(machine_file, old="counting", new="tally", version=2)
    for command in (["run"], ["step"], ["fire"]):
        argv = [*command, str(machine_file), "c1"] + (["count"] if command == ["fire"] else [])
        result = cli(*argv)
        assert result.code == 2, (command, result.err)
        message = result.err.strip()
        assert len(message.splitlines()) == 1
        assert "counter 1 (graph" in message and "counter 2 (graph" in message
        assert "no migration from version 1" in message
    assert (tmp_path / ".counters" / "c1.json").read_bytes() == document
    assert len(journal(tmp_path, "c1")) == records
    status = cli("status", str(machine_file), "c1")
    assert status.code == 2 and "no migration from version 1" in status.err


def test_an_instance_newer_than_the_installed_definition_is_refused(
    cli: Cli, machine_file: Path
) -> None:
    """Old code never runs an instance of a later version."""
    edit(machine_file, old="version: 1\n", new="version: 3\n")
    started(cli, machine_file, "c1", 1)
    edit(machine_file, old="version: 3\n", new="version: 2\n")
    result = cli("run", str(machine_file), "c1")
    assert result.code == 2
    assert "runs under counter 3" in result.err
    assert "newer than the installed counter 2" in result.err


def test_same_version_other_graph_runs_when_its_state_exists(
    cli: Cli, machine_file: Path, tmp_path: Path
) -> None:
    """A changed graph of the same version runs an instance whose state it has; the first step
    record of each run names the graph it ran under, the later ones do not repeat it."""
    started(cli, machine_file, "c1", 1)
    manual = "description: Too many errors.\n    auto: false"
    edit(machine_file, old="description: Too many errors.", new=manual)
    result = cli("run", str(machine_file), "c1", "--max-steps", "2", "--quiet")
    assert result.code == 5, result.err
    steps = [r for r in journal(tmp_path, "c1") if r["kind"] == "transition"]
    assert [("definition" in r) for r in steps] == [True, True, False]
    assert steps[0]["definition"]["graph"] != steps[1]["definition"]["graph"]  # type: ignore[index]
    assert steps[1]["definition"]["graph"] == digest(machine_file.read_text())  # type: ignore[index]


def test_same_version_without_the_state_names_the_state(
    cli: Cli, machine_file: Path, tmp_path: Path
) -> None:
    """Same version, the instance's state renamed away: one line naming the state, exit 2."""
    started(cli, machine_file, "c1", 1)
    edit(machine_file, old="counting", new="tally")
    result = cli("run", str(machine_file), "c1")
    assert result.code == 2
    assert "unknown state 'counting'" in result.err
    assert "counter 1 (graph" in result.err


# --- migrations ---------------------------------------------------------------------------


def test_migrate_dry_run_lists_then_migrate_applies_and_history_crosses_it(
    cli: Cli, machine_file: Path, tmp_path: Path
) -> None:
    """The dry run lists each migration and changes nothing; fsm migrate journals one record
    with its patch; replay, history and the diagram's visit counts cross the rename."""
    started(cli, machine_file, "c1", 2)
    started(cli, machine_file, "c2", 0)
    edit(machine_file, old="counting", new="tally", version=2, add=MIGRATION_1_TO_2)
    before = (tmp_path / ".counters" / "c1.json").read_bytes()
    dry = cli("migrate", str(machine_file), "--all", "--dry-run")
    assert dry.code == 0, dry.err
    assert "c1: counter 1 -> 2: state counting -> tally" in dry.out
    assert 'replace /phase "tally"' in dry.out
    assert "c2: counter 1 -> 2: state idle kept" in dry.out
    assert (tmp_path / ".counters" / "c1.json").read_bytes() == before
    applied = cli("migrate", str(machine_file), "--all")
    assert applied.code == 0, applied.err
    assert "migrated 2, 0 cannot, of 2 instances" in applied.out
    record = journal(tmp_path, "c1")[-1]
    assert (record["kind"], record["source"], record["dest"]) == ("migrate", "counting", "tally")
    assert {"op": "replace", "path": "/phase", "value": "tally"} in record["changes"]  # type: ignore[operator]
    assert record["definition"]["version"] == 2  # type: ignore[index]
    again = cli("migrate", str(machine_file), "c1")
    assert "nothing to migrate" in again.out
    assert cli("run", str(machine_file), "c1", "--max-steps", "1", "--quiet").code == 5
    replay = cli("replay", str(machine_file), "c1")
    assert replay.code == 0, replay.err
    # Time travel: the version before the migration and the one it made, both as recorded.
    from fsm.engine.instance import Workspace
    from fsm.serve.travel import changes_between, version_at

    instance = Workspace(tmp_path).instance(str(machine_file), "c1")
    lines = journal(tmp_path, "c1")
    migrated = next(n for n, r in enumerate(lines, start=1) if r["kind"] == "migrate")
    assert version_at(instance, migrated - 1).document["phase"] == "counting"
    assert version_at(instance, migrated).document["phase"] == "tally"
    assert version_at(instance, migrated).check.verdict == "exact"
    across = changes_between(instance, migrated - 1, migrated + 1)
    assert {"op": "replace", "path": "/phase", "value": "tally"} in across["changes"]
    history = cli("history", str(machine_file), "c1")
    assert "migrate" in history.out and "counting -> tally" in history.out
    out = str(tmp_path / "d.dot")
    diagram = cli("diagram", str(machine_file), "--run", "c1", "-o", out, "-f", "dot")
    assert diagram.code == 0, diagram.err
    dot = (tmp_path / "d.dot").read_text()
    # Two steps counted before the rename, one after: three visits of the renamed state.
    assert '"tally" [label="tally\\n×3"' in dot
    assert "count ×3" in dot


def test_a_run_migrates_first_then_steps(cli: Cli, machine_file: Path, tmp_path: Path) -> None:
    """fsm run of an instance of an earlier version with a migration migrates it, then steps."""
    started(cli, machine_file, "c1", 2)
    edit(machine_file, old="counting", new="tally", version=2, add=MIGRATION_1_TO_2)
    result = cli("run", str(machine_file), "c1", "--max-steps", "1", "--quiet")
    assert result.code == 5, result.err
    kinds = [r["kind"] for r in journal(tmp_path, "c1")][-2:]
    assert kinds == ["migrate", "transition"]
    status = cli("status", str(machine_file), "c1")
    assert "version: 2 (graph" in status.out


def test_a_state_that_cannot_migrate_is_refused_by_name(
    cli: Cli, machine_file: Path, tmp_path: Path
) -> None:
    """A state mapped to null: the run refuses, naming the state and the version to use."""
    started(cli, machine_file, "c1", 1)
    edit(
        machine_file,
        old="counting",
        new="tally",
        version=2,
        add="migrations:\n  - {from: 1, states: {counting: null}}\n",
    )
    result = cli("run", str(machine_file), "c1")
    assert result.code == 2
    assert "state 'counting' cannot migrate" in result.err


# --- fsm check against history ----------------------------------------------------------------


def test_check_names_a_removed_unmapped_state_and_its_live_instances(
    cli: Cli, machine_file: Path
) -> None:
    """A migration that leaves a removed state unmapped fails the check, naming the state and
    the live instances in it; mapping it passes."""
    started(cli, machine_file, "c1", 2)
    started(cli, machine_file, "c2", 1)
    started(cli, machine_file, "c3", 0)
    assert cli("check", str(machine_file)).code == 0
    edit(
        machine_file,
        old="counting",
        new="tally",
        version=2,
        add="migrations:\n  - {from: 1, states: {}}\n",
    )
    result = cli("check", str(machine_file))
    assert result.code == 1
    assert "state 'counting' of counter 1 (graph" in result.out
    assert "is removed and not mapped (2 live instances (c1, c2) in it)" in result.out
    edit(machine_file, old="states: {}", new="states: {counting: tally}")
    assert cli("check", str(machine_file)).code == 0


def test_check_without_a_migration_counts_the_live_instances(cli: Cli, machine_file: Path) -> None:
    started(cli, machine_file, "c1", 1)
    edit(machine_file, old="counting", new="tally", version=2)
    result = cli("check", str(machine_file))
    assert result.code == 1
    assert "none from version 1, and 1 live instance (c1) run under counter 1" in result.out


def test_check_refuses_a_final_state_mapped_to_a_live_one(cli: Cli, machine_file: Path) -> None:
    started(cli, machine_file, "c1", 1)
    edit(
        machine_file,
        old="version: 1\n",
        new="version: 2\n",
        add="migrations:\n  - {from: 1, states: {done: counting}}\n",
    )
    result = cli("check", str(machine_file))
    assert "final state 'done' of counter 1" in result.out
    assert "becomes 'counting', which is not final" in result.out


@pytest.mark.parametrize(
    ("migrations", "message"),
    [
        ("  - {from: 1, states: {counting: nowhere}}\n", "renames 'counting' to 'nowhere'"),
        ("  - {from: 2, states: {}}\n", "version 2 is this file's own"),
        ("  - {from: 1, update: nohook}\n", "unknown hook 'nohook'"),
    ],
)
def test_check_finds_migrations_that_cannot_work(
    cli: Cli, machine_file: Path, migrations: str, message: str
) -> None:
    edit(machine_file, old="version: 1\n", new="version: 2\n", add="migrations:\n" + migrations)
    result = cli("check", str(machine_file))
    assert result.code == 1
    assert message in result.out
