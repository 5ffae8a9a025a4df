"""The command line: `fsm status`, `fsm ls` over 2,000 loops, and `fsm replay` / `fsm history`
over a journal of 100,000 records, each against the baseline the issue states."""

from __future__ import annotations

import resource
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from common import COUNTER, PYTHON, Result, command_env, fsm, median_runs, timed

IMPORT_BASELINE = [PYTHON, "-c", "import transitions, pydantic, structlog, yaml"]
PARSE_BASELINE = [
    PYTHON,
    "-c",
    "import json, pathlib; "
    "[json.loads(p.read_bytes()) for p in pathlib.Path('.workflow/.loop').glob('*.json')]",
]
NO_CACHE = ["env", "FSM_CACHE_DIR="]
LOOPS = 2000
RECORDS = 100_000


def status(folder: Path, times: int) -> list[Result]:
    """`fsm status` of a counter and of a ccw-loop instance vs importing transitions, pydantic,
    structlog and yaml; the loop also without fsm's cache (its first status after a change)."""
    workspace = folder / "status"
    workspace.mkdir()
    env = command_env(folder)
    loop = ["--set", "title=x", "--set", "description=y"]
    for argv in (
        fsm("new", str(COUNTER), "--id", "s1"),
        fsm("new", "ccw-loop", "--id", "l1", *loop),
    ):
        subprocess.run(argv, cwd=workspace, env=env, check=True, capture_output=True)
    counter, cached, uncached, imports = median_runs(
        [
            fsm("status", str(COUNTER), "s1"),
            fsm("status", "ccw-loop", "l1"),
            [*NO_CACHE, *fsm("status", "ccw-loop", "l1")],
            IMPORT_BASELINE,
        ],
        workspace,
        env,
        times,
    )
    return [
        timed("fsm status counter vs imports", counter, imports, 1.5),
        timed("fsm status ccw-loop vs imports", cached, imports, 1.5),
        timed("fsm status ccw-loop, no cache vs imports", uncached, imports, None),
    ]


def listing(folder: Path, times: int) -> list[Result]:
    """`fsm ls ccw-loop --status running` over 2,000 running loops vs a plain Python process that
    parses every file; with the index of the last listing, and with no cache at all."""
    from fsm.engine.control import ControlPlane
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Workspace

    root = folder / "loops"
    instance = Workspace(root).instance("ccw-loop", "seed")
    instance.create({"title": "x", "description": "y"})
    ControlPlane(instance).apply("start")
    Engine(instance).step()  # init: a loop with its skill_state, as running loops have
    text = instance.store.paths(instance.id).document.read_text()
    for number in range(LOOPS):
        loop_id = f"loop-v2-20260101T000000-{number:08x}"
        document = instance.store.paths(instance.id).document.with_name(f"{loop_id}.json")
        document.write_text(text.replace('"seed"', f'"{loop_id}"'))
        shutil.copytree(instance.store.paths(instance.id).meta, document.with_suffix(".fsm"))
    time.sleep(2.5)  # the index keeps the rows of documents left alone for two seconds
    command = fsm("ls", "ccw-loop", "--status", "running")
    indexed, uncached, parsed = median_runs(
        [command, [*NO_CACHE, *command], PARSE_BASELINE], root, command_env(folder), times
    )
    return [
        timed(f"fsm ls {LOOPS:,} loops vs parsing them", indexed, parsed, 2.0),
        timed(f"fsm ls {LOOPS:,} loops, no cache vs parsing", uncached, parsed, None),
    ]


SMALL_LOOP = {
    "title": "Implement user authentication",
    "description": "Add login/logout functionality",
    "max_iterations": 10,
    "status": "created",
    "current_iteration": 0,
    "created_at": "2026-01-22T10:00:00+08:00",
    "updated_at": "2026-01-22T10:00:00+08:00",
}
"""A loop as the CCW dashboard creates it (its API's document, before any skill ran): no
``skill_state``, no journal beside it."""


def listing_small(folder: Path, times: int) -> list[Result]:
    """`fsm ls ccw-loop` over 2,000 small loops the dashboard made (documents only) vs a plain
    Python process that parses every file."""
    import json

    root = folder / "small"
    loops = root / ".workflow" / ".loop"
    loops.mkdir(parents=True)
    for number in range(LOOPS):
        loop_id = f"loop-v2-20260122-{number:06x}"
        text = json.dumps({"loop_id": loop_id, **SMALL_LOOP}, indent=2)
        (loops / f"{loop_id}.json").write_text(text)
    time.sleep(2.5)  # the index keeps the rows of documents left alone for two seconds
    command = fsm("ls", "ccw-loop")
    indexed, uncached, parsed = median_runs(
        [command, [*NO_CACHE, *command], PARSE_BASELINE], root, command_env(folder), times
    )
    return [
        timed(f"fsm ls {LOOPS:,} small loops vs parsing them", indexed, parsed, 2.0),
        timed(f"fsm ls {LOOPS:,} small loops, no cache vs parsing", uncached, parsed, None),
    ]


def journal(folder: Path, times: int) -> list[Result]:
    """`fsm replay` and `fsm history` of a 100,000-record journal: seconds against the 1.0 s
    that 100,000 records/s allows, and peak memory against 60 MB (and against the peak of a
    10,000-record journal: memory must not grow with the journal)."""
    workspace = folder / "journal"
    env = command_env(folder)
    for instance_id, records in (("long", RECORDS), ("short", RECORDS // 10)):
        _long_journal(workspace, instance_id, records, env)
    c = str(COUNTER)
    measured: dict[str, list[tuple[float, float, int]]] = {}
    commands = {
        "replay": fsm("replay", c, "long"),
        "history": fsm("history", c, "long"),
        "history --json": fsm("history", c, "long", "--json"),
        "history --tail 10": fsm("history", c, "long", "--tail", "10"),
        "replay short": fsm("replay", c, "short"),
    }
    for round_number in range(times + 1):
        for name, argv in commands.items():
            sample = _run_measured(argv, workspace, env)
            if round_number:
                measured.setdefault(name, []).append(sample)
    wall = {name: statistics.median(s[0] for s in runs) for name, runs in measured.items()}
    cpu = {name: statistics.median(s[1] for s in runs) for name, runs in measured.items()}
    peak = {name: max(s[2] for s in runs) * 1024 for name, runs in measured.items()}
    results = [
        _throughput(f"fsm {name} {RECORDS:,} records", wall[name])
        for name in ("replay", "history", "history --json")
    ]
    results += [
        _throughput(f"fsm {name} {RECORDS:,} records, CPU time", cpu[name], None)
        for name in ("replay", "history")
    ]
    tail = wall["history --tail 10"]
    results.append(timed("fsm history --tail 10 vs fsm replay", tail, wall["replay"], None))
    results += [
        _memory(f"fsm {name} peak memory vs 60 MB", peak[name], 60 * 2**20, 1.0)
        for name in ("replay", "history")
    ]
    results.append(
        _memory(
            "fsm replay peak memory, 100k vs 10k records", peak["replay"], peak["replay short"], 1.1
        )
    )
    return results


STEPS = 20_000


def replay_steps(folder: Path, times: int) -> list[Result]:
    """`fsm replay` of a counter's 20,000 steps, each a new version its patch rebuilds and
    replay checks (start-up included): seconds against the 0.2 s that 100,000 records/s
    allows."""
    from patch_bench import _journal

    workspace = folder / "steps"
    env = command_env(folder)
    _journal(workspace, "steps", env, STEPS)
    argv = fsm("replay", str(COUNTER), "steps")
    samples = [_run_measured(argv, workspace, env) for _ in range(times + 1)][1:]
    wall = statistics.median(s[0] for s in samples)
    cpu = statistics.median(s[1] for s in samples)
    return [
        _throughput(f"fsm replay {STEPS:,} steps", wall, records=STEPS),
        _throughput(f"fsm replay {STEPS:,} steps, CPU time", cpu, None, records=STEPS),
    ]


def _throughput(
    name: str, seconds: float, budget: float | None = 1.0, records: int = RECORDS
) -> Result:
    rate = records / seconds
    return Result(
        name, seconds, records / 100_000, budget, f"{rate / 1000:.0f}k rec/s", "100k rec/s"
    )


def _memory(name: str, value: int, baseline: int, budget: float) -> Result:
    return Result(
        name, value, baseline, budget, f"{value / 2**20:.1f} MB", f"{baseline / 2**20:.1f} MB"
    )


_PEAK = (
    "import sys\n"
    "from fsm.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "status = open('/proc/self/status').read()\n"
    "print(status.split('VmHWM:')[1].split()[0], file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _run_measured(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Wall and CPU seconds and peak resident memory (kB) of one ``fsm`` run, its output thrown
    away.

    The peak is the process's own high-water mark (``VmHWM``, Linux): the rusage of a child
    also counts the pages it shared with this process between its fork and its exec.
    """
    command = [PYTHON, "-c", _PEAK, *argv[3:]]  # argv is fsm(...): python -m fsm ...
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, cpu, int(done.stderr.split()[-1])


def _long_journal(workspace: Path, instance_id: str, records: int, env: dict[str, str]) -> None:
    """A counter whose journal holds ``records`` records that replay cleanly: a few real steps,
    the last counting step repeated (each starts where the one before ended)."""
    c = str(COUNTER)
    workspace.mkdir(exist_ok=True)
    new = fsm("new", c, "--id", instance_id, "--set", "limit=1000000000")
    subprocess.run(new, cwd=workspace, env=env, check=True, capture_output=True)
    run = fsm("run", c, instance_id, "--max-steps", "3", "-q")
    stopped = subprocess.run(run, cwd=workspace, env=env, check=False, capture_output=True)
    assert stopped.returncode == 5, stopped.stderr  # the step limit
    path = workspace / ".counters" / f"{instance_id}.fsm" / "journal.ndjson"
    lines = path.read_bytes().splitlines(keepends=True)
    with path.open("wb") as handle:
        handle.writelines(lines[:-1])
        handle.write(lines[-1] * (records - len(lines) + 1))
