"""Testing machines: a harness on the real engine, and scripted stand-ins for agents and commands.

A test creates instances of its machine in a temporary workspace with :class:`Harness`, drives
them with the real engine through a :class:`Driver`, and answers the agents and commands its
actions call with a :class:`ScriptedExecutor` (every call is recorded)::

    from fsm.testing import Harness, Reply

    def test_an_approved_file_completes_the_queue(tmp_path: Path) -> None:
        harness = Harness(MACHINE, tmp_path, document=ReviewQueue)
        harness.executor.on_agent("claude", Reply(stdout="APPROVE"))
        queue = harness.create({"files": ["app.py"]})
        assert queue.run().outcome == "completed"
        queue.assert_path(["queued", "reviewing", "done"])
        queue.assert_outcome("completed", "1 of 1 files approved")
        assert "app.py" in harness.executor.prompts("claude")[0]

Without a folder, ``with Harness(MACHINE) as harness:`` works in a temporary one. The clock is
simulated; calls no rule answers run for real (through a
:class:`~fsm.process.executor.SubprocessExecutor` with the harness's agent tables), unless the
harness is given ``executor=ScriptedExecutor()``, which refuses them.

For definitions that change: :func:`replay_decisions` replays journals of real runs, kept as
fixtures by :func:`export_journals`, against the definition in the checkout, and its report's
``assert_same()`` fails on the first step each would decide otherwise.

For stores: :class:`MemoryStorage` keeps documents and journals in memory (``Harness(...,
storage=MemoryStorage())``, ``Workspace(..., storage=MemoryStorage())``), and
:class:`~fsm.testing.contract.StoreContract` is the conformance suite every store runs
(docs/stores.md).
"""

from __future__ import annotations

from typing import Any

from fsm.store.memory import MemoryJournal, MemoryLease, MemoryStorage, MemoryStore
from fsm.testing._decisions import export_journals, replay_decisions
from fsm.testing._driver import Driver, applied
from fsm.testing._harness import Harness
from fsm.testing._scripted import Answer, Call, Matcher, Reply, ScriptedExecutor

__all__ = [
    "Answer",
    "Call",
    "Driver",
    "Harness",
    "Matcher",
    "MemoryJournal",
    "MemoryLease",
    "MemoryStorage",
    "MemoryStore",
    "Reply",
    "ScriptedExecutor",
    "applied",
    "export_journals",
    "replay_decisions",
]


def __getattr__(name: str) -> Any:
    """``StoreContract``, the store conformance suite, lives in :mod:`fsm.testing.contract`
    (imported when asked for: it needs pytest, which running machines does not)."""
    if name == "StoreContract":
        from fsm.testing.contract import StoreContract

        return StoreContract
    raise AttributeError(f"module 'fsm.testing' has no attribute {name!r}")
