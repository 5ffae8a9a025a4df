"""Performance benchmarks, run on demand::

    .venv/bin/pip install -e '.[bench]' && .venv/bin/python benchmarks/run.py [--quick]
    .venv/bin/python benchmarks/run.py --repeat 3 --write-docs   # medians, into the README

Every figure is a ratio against a baseline measured in the same run on the same machine, next
to its budget, so that it means the same on a fast laptop and on a loaded CI box:

* in-memory step vs a python-statemachine 3 event (budget 0.5x); persisted step vs a bare atomic
  write of the same bytes plus a journal append (1.35x); building a 1,000-state machine vs
  100 ms; ``list_instances`` (the API) over 2,000 counters vs parsing the files (2x);
* ``fsm status`` (a counter; a ccw-loop) vs importing transitions + pydantic + structlog + yaml
  (1.5x); ``fsm ls ccw-loop --status running`` over 2,000 running loops vs a plain Python
  process that parses every file (2x), and ``fsm ls ccw-loop`` over 2,000 small loops as the
  CCW dashboard creates them (documents only, 2x); all also without fsm's cache, for
  information;
* ``fsm replay`` / ``fsm history`` (text, ``--json``) of a 100,000-record journal: the seconds
  taken against the 1 s that 100,000 records/s allows (the CPU seconds of replay and history
  too, for information: a busy moment of a shared machine does not move them), peak memory
  against 60 MB and against
  the peak of a 10,000-record journal (1.1x: memory must not grow with the journal);
  ``fsm replay`` of a counter's 20,000 steps, each a new version it rebuilds and checks
  (start-up included), against the 0.2 s that 100,000 records/s allows;
* ``fsm run --all`` over 1,000 counters with 1 job vs one ``fsm run`` process per instance
  (0.5x; the processes are timed on a sample of 100 and extrapolated, marked ``*``), and with
  2 and 4 jobs vs 1 job (0.75x: the machine has as many cores as it has);
* the instances page of ``fsm serve`` over 2,000 counters (page and rows over HTTP) vs
  ``fsm ls --json`` as a command (1.0x), and vs 300 ms;
* ``fsm worker --drain --jobs N`` (N = 1, 2, 4, 8) over 1,000 counters on a PostgreSQL server
  started for the run vs a bare claim-update-insert-commit loop on the same server (2.0x of its
  time: at least half its steps/s), and vs the file store's ``run --all`` (for information); a
  pause's latency; a claim with 100,000 finished instances in the table vs none (1.25x). Without
  a PostgreSQL server or psycopg this part says so in one line and is left out (see
  ``benchmarks/postgres_bench.py``).
* what the journal's patches cost (``patch_bench``): a persisted step with its patch vs the same
  step without one, CPU time (1.15x for a counter, 1.3x for a document of 200 tasks), and
  ``fsm replay`` (2x: it rebuilds and checks every version) and ``fsm history`` (1.25x) of a
  100,000-record journal whose every record makes a new version, vs the same journal without
  its patches.
* a replay of decisions (``decisions_bench``): ``fsm replay --decisions`` of a counter's
  20,000-step journal against the installed definition (every guard's recorded value reused,
  2x) and against a copy whose guard's code changed (evaluated at every step, 4x), vs the plain
  replay of the same journal; the lines show steps a second (the issue's target: 10,000).
* what ``pytest --fsm-cov`` costs (``coverage_bench``, run with ``--only coverage``: it runs
  test sessions and is left out of the default list): 200 counter runs with the journal watched
  vs unwatched, CPU time (1.10x), and a pytest session of the project's own tests with
  ``--fsm-cov`` vs without, wall time (1.10x).

Fairness of the command-line figures: both sides run with bytecode caches, and fsm's own cache
(:mod:`fsm.base.cache`: checked definitions, the index of ``fsm ls``) lives in a folder of this run,
filled by the untimed warm-up runs; every command is timed several times, interleaved with its
baseline, and the medians are compared. ``--repeat K`` runs it all K times and shows, for each
figure, the run with the median ratio. Benchmarks inform, they do not gate: nothing here
is part of the test suite, and the exit code is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import cli_bench
import coverage_bench
import decisions_bench
import engine_bench
import fleet_bench
import patch_bench
import postgres_bench
import serve_bench
from common import ROOT, Result

README = ROOT / "README.md"
"""Where the last measured table is shown (docs/performance.md explains it)."""
START, END = "<!-- benchmark table -->", "<!-- end of benchmark table -->"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the table (and write it into the docs when asked)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (rougher)")
    parser.add_argument(
        "--only",
        default="engine,status,ls,journal,fleet,serve,patches,decisions,postgres",
        help="comma-separated parts to run (default: engine,status,ls,journal,fleet,serve,"
        "patches,decisions,postgres)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="K",
        help="run everything K times and show, for each figure, the run with the median ratio "
        "(a busy moment of a shared machine then moves no figure)",
    )
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help=f"put the table into {README.relative_to(ROOT)} (between its table markers)",
    )
    args = parser.parse_args(argv)
    times, rounds = (3, 1) if args.quick else (9, 3)
    parts: dict[str, Callable[[Path], list[Result]]] = {
        "engine": lambda f: [
            engine_bench.in_memory_step(f),
            *engine_bench.persisted_step(f),
            engine_bench.build_large(f),
            *engine_bench.list_api(f),
        ],
        "status": lambda f: cli_bench.status(f, times),
        "ls": lambda f: [*cli_bench.listing(f, times), *cli_bench.listing_small(f, times)],
        "journal": lambda f: [
            *cli_bench.journal(f, max(3, times // 2)),
            *cli_bench.replay_steps(f, times),
        ],
        "fleet": lambda f: fleet_bench.fleet(f, rounds),
        "serve": lambda f: serve_bench.instances_page(f, times),
        "postgres": lambda f: _postgres(f, rounds, args.quick),
        "decisions": lambda f: decisions_bench.decisions(f, max(3, times // 2)),
        "coverage": lambda f: coverage_bench.coverage(f, max(3, times // 3)),
        "patches": lambda f: [
            *patch_bench.persisted_step(f),
            *patch_bench.journal(f, max(3, times // 2)),
        ],
    }
    runs: dict[str, list[Result]] = {}
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores")
    for run in range(args.repeat):
        if args.repeat > 1:
            print(f"-- run {run + 1} of {args.repeat}")
        for result in _run_parts(parts, args.only.split(",")):
            print(result.line(), flush=True)
            runs.setdefault(result.name, []).append(result)
    results = [_median(found) for found in runs.values()]
    if args.repeat > 1:
        print(f"-- for each figure, the run with the median ratio of {args.repeat}")
        for result in results:
            print(result.line())
    judged = [r for r in results if r.ok is not None]
    print(f"{sum(bool(r.ok) for r in judged)} of {len(judged)} within budget")
    if args.write_docs:
        write_docs(results)
    return 0


def _run_parts(parts: dict[str, Callable[[Path], list[Result]]], names: list[str]) -> list[Result]:
    folder = Path(tempfile.mkdtemp(prefix="fsm-bench-"))
    os.environ["FSM_CACHE_DIR"] = str(folder / "fsm-cache")  # this process's API calls too
    results: list[Result] = []
    try:
        for name in names:
            part = folder / name
            part.mkdir()
            results += parts[name](part)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return results


def _postgres(folder: Path, rounds: int, quick: bool) -> list[Result]:
    """The PostgreSQL part, or one line saying why it cannot run here."""
    reason = postgres_bench.missing()
    if reason is not None:
        print(f"skip postgres: {reason}", flush=True)
        return []
    os.environ.pop("FSM_STORE", None)  # its workspaces name their own server
    instances = 200 if quick else postgres_bench.INSTANCES
    return postgres_bench.postgres(folder, rounds, instances=instances)


def _median(results: list[Result]) -> Result:
    """The result whose ratio is the median of ``results`` (the lower middle of an even count)."""
    ordered = sorted(results, key=lambda result: result.ratio)
    return ordered[(len(ordered) - 1) // 2]


def write_docs(results: list[Result]) -> None:
    """Replace the table between the markers of the README (the only copy of the table)."""
    text = README.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{README}: the markers {START} and {END} are missing")
    before, _, rest = text.partition(START)
    _, _, after = rest.partition(END)
    rows = [
        "| figure | measured | baseline | ratio | budget | |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
        *(result.row() for result in results),
    ]
    table = "\n".join([START, *rows, END])
    README.write_text(before + table + after, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
