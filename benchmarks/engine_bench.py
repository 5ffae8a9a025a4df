"""The engine in one process: an in-memory step, a persisted step, building a large machine and
listing through the Python API."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import COUNTER, Result, best_of, timed


def paired_best(
    ours: Callable[[], Any], theirs: Callable[[], Any], number: int
) -> tuple[float, float]:
    """Seconds per call of each, the best of rounds that alternate between the two (a busy
    moment of the machine weighs on both)."""
    best = [float("inf"), float("inf")]
    for _ in range(7):
        for side, func in enumerate((ours, theirs)):
            start = time.perf_counter()
            for _ in range(number):
                func()
            best[side] = min(best[side], (time.perf_counter() - start) / number)
    return best[0], best[1]


def in_memory_step(folder: Path) -> Result:
    """The engine's step without the disk (guards, kernel, actions, update, validation, the
    result's commit validated again), vs a python-statemachine 3 event of a two-state machine.
    Logging is configured as the command line does by default (warnings and errors shown):
    rendering info events for a terminal is not the engine's cost."""
    from statemachine import State, StateMachine

    from fsm.base.log import configure
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Instance, Loaded, Workspace
    from fsm.model.machine import load_machine

    configure("console", "warning")

    class MemoryInstance(Instance):
        """An instance whose document lives in memory (commit keeps it, load returns it)."""

        current: Loaded

        def load(self) -> Loaded:
            return self.current

        def commit(self, data: Any, record: Any, *, base: Any, locked: bool = False) -> Loaded:
            doc = self.validate(data)
            self.current = Loaded(dict(data), b"", doc, self.machine.codec.read(doc), "running")
            return self.current

    machine = load_machine(COUNTER)
    instance = MemoryInstance(Workspace(folder), machine, "mem")
    data = {"status": "running", "phase": "counting", "count": 0, "limit": 10**12}
    instance.current = Loaded(data, b"", instance.validate(data), "counting", "running")
    instance.log.file = None
    engine = Engine(instance)
    engine._lock_held = True  # no run lock: nothing is on disk

    class Toggle(StateMachine):  # type: ignore[misc]
        a = State(initial=True)
        b = State()
        flip = a.to(b) | b.to(a)

    toggle = Toggle()
    ours, theirs = paired_best(engine.step, lambda: toggle.send("flip"), 2000)
    return timed("in-memory step vs python-statemachine", ours, theirs, 0.5)


def persisted_step(folder: Path) -> list[Result]:
    """A real step on disk vs an atomic write of the same bytes plus a journal append; and the
    CPU time of each, which waiting for the disk does not blur (for information)."""
    from fsm.engine.control import ControlPlane
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine
    from fsm.store.file_store import atomic_write_text
    from fsm.store.journal import Journal

    machine = load_machine(COUNTER)
    instance = Workspace(folder / "persisted").instance(machine, "disk")
    instance.create({"limit": 10**12})
    ControlPlane(instance).apply("start")
    engine = Engine(instance)
    steps = 200
    # A step as a run takes it (the run's files kept open), the start of the run amortised.
    ours = best_of(lambda: engine.run(max_steps=steps), 1) / steps
    text = instance.store.paths(instance.id).document.read_text()
    record = instance.journal.read().records[-1]
    journal = Journal(folder / "baseline.ndjson")
    target = folder / "baseline.json"

    def baseline() -> None:
        atomic_write_text(target, text)
        journal.append(record)

    theirs = best_of(baseline, steps)
    cpu = [float("inf"), float("inf")]
    for _ in range(5):
        for side, run in enumerate(
            (lambda: engine.run(max_steps=steps), lambda: _times(baseline, steps))
        ):
            start = time.process_time()
            run()
            cpu[side] = min(cpu[side], (time.process_time() - start) / steps)
    return [
        timed("persisted step vs atomic write + append", ours, theirs, 1.35),
        timed("persisted step vs write + append, CPU time", cpu[0], cpu[1], None),
    ]


def _times(func: Callable[[], Any], number: int) -> None:
    for _ in range(number):
        func()


def build_large(folder: Path) -> Result:
    """Resolve and build the kernel of a 1,000-state machine vs 100 ms."""
    from pydantic import BaseModel

    from fsm.engine.engine import Kernel
    from fsm.model.definition import MachineSpec
    from fsm.model.machine import resolve
    from fsm.model.registry import Registry

    registry = Registry()

    @registry.document
    class Doc(BaseModel):
        s: str = "s0"

    size = 1000
    spec = MachineSpec.model_validate(
        {
            "name": "large",
            "version": 1,
            "description": "a chain of states",
            "module": "unused.py",
            "document": "Doc",
            "state": {"field": "s"},
            "initial": "s0",
            "storage": {"document": "{id}.json"},
            "states": {
                f"s{i}": {"description": "a state", "final": i == size - 1} for i in range(size)
            },
            "transitions": [
                {"event": "next", "source": f"s{i}", "dest": f"s{i + 1}", "description": "on"}
                for i in range(size - 1)
            ],
        }
    )

    def build() -> None:
        machine, problems = resolve(spec, registry, folder / "large.yaml")
        assert machine is not None, problems
        Kernel(machine)

    return timed("build a 1,000-state machine vs 100 ms", best_of(build, 3, 3), 0.100, 1.0)


def list_api(folder: Path) -> list[Result]:
    """``list_instances`` (the API: no index) over 2,000 counters vs parsing the same files:
    documents another program wrote (no journal beside them), then the same documents each
    with the journal fsm would have started (for information: its first line is read to tell
    apart machines sharing a folder)."""
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine
    from fsm.store.file_store import FileStore
    from fsm.view.listing import list_instances

    machine = load_machine(COUNTER)
    workspace = Workspace(folder / "many")
    store = workspace.store_for(machine)
    assert isinstance(store, FileStore)  # the benchmark writes the files itself
    documents = []
    for number in range(2000):
        data = {"status": "running", "phase": "counting", "count": number, "limit": 10**6}
        path = store.paths(f"c{number:05d}").document
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))
        documents.append(path)
    results = []
    for name, budget in (("", 2.0), (", journals", None)):
        if budget is None:
            for path in documents:
                record = {
                    "time": "2026-01-01T00:00:00.000Z",
                    "kind": "create",
                    "machine": "counter",
                }
                store.paths(path.stem).journal.parent.mkdir(exist_ok=True)
                store.paths(path.stem).journal.write_text(json.dumps(record) + "\n")
        ours, theirs = paired_best(
            lambda: list_instances(workspace, [machine]),
            lambda: [json.loads(p.read_bytes()) for p in documents],
            1,
        )
        results.append(
            timed(f"list_instances (API) 2,000 counters{name} vs parse", ours, theirs, budget)
        )
    return results
