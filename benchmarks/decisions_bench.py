"""What a replay of decisions costs (``fsm replay --decisions``): the replay of a counter's
20,000-step journal against a definition, vs the plain replay of the same journal (which reads
every record, follows the state chain and rebuilds every version from the patches), both in this
process, the rounds alternating.

Two candidates: the installed definition itself (every guard's recorded value reused) and a
copy whose guard's code changed (evaluated at every step on the rebuilt document, validated by
the candidate's model). The issue's target is 10,000 steps a second; the lines show the rate
(steps per second of CPU time).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from common import COUNTER, Result

STEPS = 20_000


def _journal(folder: Path) -> tuple[object, object]:
    """A counter instance whose journal holds STEPS steps, as a run writes them; the workspace
    and the instance."""
    from fsm.base.log import configure
    from fsm.base.update import bytes_hash
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine

    configure("console", "warning")
    machine = load_machine(COUNTER)
    workspace = Workspace(folder / "decisions")
    instance = workspace.instance(machine, "long")
    instance.create({"limit": 10**12})
    Engine(instance).run(max_steps=3)
    rules = instance.rules
    paths = instance.store.paths(instance.id)
    lines = paths.journal.read_bytes().splitlines(keepends=True)
    template = json.loads(lines[-1])
    data = json.loads(paths.document.read_bytes())
    with paths.journal.open("ab") as handle:
        for _ in range(STEPS - 3):
            data["count"] += 1
            record = {
                **template,
                "doc_hash": bytes_hash(rules.render(data, instance.id)),
                "core_hash": rules.core_hash(data),
                "changes": [{"op": "replace", "path": "/count", "value": data["count"]}],
            }
            handle.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    paths.document.write_bytes(rules.render(data, instance.id))
    return workspace, instance


def _changed_copy(folder: Path) -> Path:
    """The counter with its below_limit guard's code changed (same decisions)."""
    copy = folder / "changed"
    shutil.copytree(COUNTER.parent, copy)
    module = copy / "functions.py"
    text = module.read_text()
    module.write_text(text.replace("return doc.count < doc.limit", "return doc.limit > doc.count"))
    return copy / "machine.yaml"


def decisions(folder: Path, rounds: int = 5) -> list[Result]:
    """Decision replay vs plain replay of the same journal, best of ``rounds`` each."""
    from fsm.engine.decisions import Replayer
    from fsm.model.machine import load_machine
    from fsm.view.inspect import replay

    workspace, instance = _journal(folder)
    installed = instance.machine  # type: ignore[attr-defined]
    changed = load_machine(_changed_copy(folder))
    options = workspace.options_for(installed)  # type: ignore[attr-defined]
    sides = {
        "plain": lambda: replay(instance),  # type: ignore[arg-type]
        "recorded": lambda: Replayer(installed, installed, options).replay(
            "long",
            instance.journal.entries(),  # type: ignore[attr-defined]
        ),
        "evaluated": lambda: Replayer(installed, changed, options).replay(
            "long",
            instance.journal.entries(),  # type: ignore[attr-defined]
        ),
    }
    # CPU time: on a shared machine the wall clock counts the waits for a core, which say
    # nothing of the replay (the ratio is the same either way).
    best = dict.fromkeys(sides, float("inf"))
    for _ in range(rounds):
        for name, run in sides.items():
            start = time.process_time()
            found = run()
            best[name] = min(best[name], time.process_time() - start)
            if name != "plain":
                decided = found.divergence is None and not found.undecidable  # type: ignore[attr-defined]
                assert decided, found
    results = []
    for name, label in (("recorded", "guards recorded"), ("evaluated", "a changed guard")):
        per_step, baseline = best[name] / STEPS, best["plain"] / STEPS
        rate = STEPS / best[name]
        results.append(
            Result(
                f"decision replay ({label}) vs plain replay, CPU",
                per_step,
                baseline,
                2.0 if name == "recorded" else 4.0,
                f"{rate:,.0f} steps/s",
                f"{STEPS / best['plain']:,.0f} steps/s",
            )
        )
    return results


def main() -> None:
    """Run this part alone (``python benchmarks/decisions_bench.py``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fsm-bench-decisions-") as name:
        for result in decisions(Path(name)):
            print(result.line(), flush=True)


if __name__ == "__main__":
    main()
