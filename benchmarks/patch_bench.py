"""What the journal's patches cost: a persisted step with its patch vs the same step without one
(a small document and one of 200 tasks), and ``fsm replay`` / ``fsm history`` of a
100,000-record journal whose every record makes a new version, with the patches vs the same
journal without them.

The steps without a patch are the same engine with :func:`fsm.model.patch.changes_of` replaced
by one that says nothing (what fsm wrote before records said what changed), in the same process,
the rounds alternating with the real ones. The journals are made once: a counter's real first
steps, then records each counting one further (their hashes those of the documents they lead
to, as a run would write them); the baseline is the same file with the ``changes`` key removed
from every line.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cli_bench import _run_measured
from common import COUNTER, Result, command_env, fsm, timed

RECORDS = 100_000
TASKS = 200


@contextmanager
def _no_patches() -> Iterator[None]:
    """Steps committed meanwhile say nothing of what they changed."""
    from fsm.engine import transaction

    real = transaction.changes_of
    transaction.changes_of = lambda old, new, limit=0: {}
    try:
        yield
    finally:
        transaction.changes_of = real


def _tasks() -> list[dict[str, Any]]:
    """A plan of 200 tasks, about the size of a long ccw-loop document's."""
    return [
        {
            "id": f"T{n:03d}",
            "title": f"Task {n}: make the parser accept the {n}th form of input",
            "status": "completed" if n < 100 else "pending",
            "files": [f"src/module_{n}.py", f"tests/test_module_{n}.py"],
            "notes": "x" * 120,
        }
        for n in range(TASKS)
    ]


def persisted_step(folder: Path) -> list[Result]:
    """A persisted counter step with its patch vs without, for the counter's own document and
    for one that also holds 200 tasks (other programs' fields, compared by every patch)."""
    from fsm.base.log import configure
    from fsm.engine.control import ControlPlane
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine

    configure("console", "warning")
    machine = load_machine(COUNTER)
    workspace = Workspace(folder / "steps")
    results = []
    for name, extra in (("counter", None), (f"{TASKS} tasks", _tasks())):
        engines = []
        for side in ("with", "without"):
            instance = workspace.instance(machine, f"{side}-{len(extra or [])}")
            instance.create({"limit": 10**12})
            if extra is not None:
                path = instance.store.paths(instance.id).document
                data = json.loads(path.read_text())
                path.write_text(json.dumps({**data, "tasks": extra}, indent=2) + "\n")
            ControlPlane(instance).apply("start")
            engines.append(Engine(instance))
        steps = 100
        wall = [float("inf"), float("inf")]
        cpu = [float("inf"), float("inf")]
        for _ in range(7):
            for side, engine in enumerate(engines):
                start, start_cpu = time.perf_counter(), time.process_time()
                if side:
                    with _no_patches():
                        engine.run(max_steps=steps)
                else:
                    engine.run(max_steps=steps)
                wall[side] = min(wall[side], (time.perf_counter() - start) / steps)
                cpu[side] = min(cpu[side], (time.process_time() - start_cpu) / steps)
        results.append(timed(f"persisted step ({name}) vs without patch", *wall, None))
        budget = 1.15 if extra is None else 1.3
        results.append(timed(f"persisted step ({name}) vs without, CPU", *cpu, budget))
    return results


def journal(folder: Path, times: int) -> list[Result]:
    """``fsm replay`` (which rebuilds and checks every version from the patches) and
    ``fsm history`` of a 100,000-record journal each of whose records makes a new version, vs
    the same commands over the same journal without its patches."""
    workspace = folder / "journal"
    env = command_env(folder)
    _journal(workspace, "patched", env)
    _strip(workspace, "patched", "bare")
    c = str(COUNTER)
    commands = {
        "replay": (fsm("replay", c, "patched"), fsm("replay", c, "bare")),
        "history": (fsm("history", c, "patched"), fsm("history", c, "bare")),
        "history --json": (
            fsm("history", c, "patched", "--json"),
            fsm("history", c, "bare", "--json"),
        ),
    }
    walls: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in commands}
    cpus: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in commands}
    for round_number in range(times + 1):
        for name, pair in commands.items():
            for side, argv in enumerate(pair):
                wall, cpu, _ = _run_measured(argv, workspace, env)
                if round_number:
                    walls[name][side].append(wall)
                    cpus[name][side].append(cpu)
    results = []
    for name in commands:
        title = f"fsm {name} {RECORDS // 1000}k records, patches vs none"
        budget = 2.0 if name == "replay" else 1.25
        for suffix, samples, judged in (("", walls, None), (", CPU", cpus, budget)):
            ours, theirs = (statistics.median(side) for side in samples[name])
            results.append(timed(title + suffix, ours, theirs, judged))
    return results


def _journal(
    workspace: Path, instance_id: str, env: dict[str, str], records: int = RECORDS
) -> None:
    """A counter whose journal holds ``records`` records, each counting one further, as a run
    writes them (its patch, and the hashes of the document it leads to)."""
    from fsm.base.update import bytes_hash
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine

    workspace.mkdir(exist_ok=True)
    c = str(COUNTER)
    new = fsm("new", c, "--id", instance_id, "--set", "limit=1000000000")
    subprocess.run(new, cwd=workspace, env=env, check=True, capture_output=True)
    run = fsm("run", c, instance_id, "--max-steps", "3", "-q")
    stopped = subprocess.run(run, cwd=workspace, env=env, check=False, capture_output=True)
    assert stopped.returncode == 5, stopped.stderr  # the step limit
    instance = Workspace(workspace).instance(load_machine(COUNTER), instance_id)
    rules = instance.rules
    paths = instance.store.paths(instance_id)
    lines = paths.journal.read_bytes().splitlines(keepends=True)
    template = json.loads(lines[-1])
    data = json.loads(paths.document.read_bytes())
    with paths.journal.open("ab") as handle:
        for _ in range(records - len(lines)):
            data["count"] += 1
            record = {
                **template,
                "doc_hash": bytes_hash(rules.render(data, instance_id)),
                "core_hash": rules.core_hash(data),
                "changes": [{"op": "replace", "path": "/count", "value": data["count"]}],
            }
            handle.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    paths.document.write_bytes(rules.render(data, instance_id))


def _strip(workspace: Path, source: str, target: str) -> None:
    """A copy of ``source`` (document and journal) as ``target``, without the patches."""
    folder = workspace / ".counters"
    (folder / f"{target}.json").write_bytes((folder / f"{source}.json").read_bytes())
    meta = folder / f"{target}.fsm"
    meta.mkdir()
    with (
        (folder / f"{source}.fsm" / "journal.ndjson").open("rb") as lines,
        (meta / "journal.ndjson").open("wb") as out,
    ):
        for line in lines:
            record = json.loads(line)
            record.pop("changes", None)
            out.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")


def main() -> None:
    """Run this part alone (``python benchmarks/patch_bench.py``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fsm-bench-patches-") as name:
        folder = Path(name)
        for result in [*persisted_step(folder), *journal(folder, 5)]:
            print(result.line(), flush=True)


if __name__ == "__main__":
    main()
