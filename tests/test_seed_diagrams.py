"""Every edge the seeds draw appears in our diagrams, between the same states, same direction.

The seeds draw one picture mixing the lifecycle status (pending, running, completed) with the
phases; our diagrams draw the status layer (control commands) beside the FSM states. Each seed
edge below is named with the seed's labels and mapped to the layer and states it is drawn
between here. Where the seed fans out from its ``running`` hub to actions that then merge, our
machines take those actions in the seed's documented order, so the fan is a chain.
"""

from __future__ import annotations

import pytest

from fsm.model.discovery import open_machine
from fsm.view.diagram import diagram_model

# (machine, seed edge, layer, source, dest): layer "status" for the lifecycle, "state" for phases.
SEED_EDGES = [
    # seed 003 (issue-manager): pending -(init)-> running -> list/plan/execute loop -> complete.
    ("issue-manager", "pending -> running", "status", "pending", "running"),
    ("issue-manager", "init (Action-Init)", "state", "init", "listing"),
    ("issue-manager", "running -> list", "state", "init", "listing"),
    ("issue-manager", "list -> plan", "state", "listing", "planning"),
    ("issue-manager", "plan -> execute", "state", "planning", "executing"),
    ("issue-manager", "execute -> back to list", "state", "executing", "listing"),
    ("issue-manager", "execute -> complete", "state", "executing", "complete"),
    ("issue-manager", "list -> complete (nothing left)", "state", "listing", "complete"),
    # seed 004 (skill-tuning): the State Transition Diagram.
    ("skill-tuning", "pending -(action-init)-> running", "state", "pending", "running"),
    ("skill-tuning", "pending -> running (status)", "status", "pending", "running"),
    ("skill-tuning", "running -> context", "state", "running", "context_diagnosed"),
    ("skill-tuning", "context -> memory", "state", "context_diagnosed", "memory_diagnosed"),
    ("skill-tuning", "memory -> dataflow", "state", "memory_diagnosed", "dataflow_diagnosed"),
    ("skill-tuning", "diagnosis -> action-verify", "state", "agent_diagnosed", "verified"),
    ("skill-tuning", "quality gate=pass -> completed", "state", "verified", "completed"),
    ("skill-tuning", "apply fix", "state", "verified", "fix_applied"),
    ("skill-tuning", "iterate (< max) -> running", "state", "fix_applied", "running"),
    ("skill-tuning", "running: error_count >= 3 -> failed", "state", "running", "failed"),
    # seeds 001/002 (ccw-loop): the API status machine and the INIT..COMPLETE actions.
    ("ccw-loop", "created -(start)-> running", "status", "created", "running"),
    ("ccw-loop", "running -(pause)-> paused", "status", "running", "paused"),
    ("ccw-loop", "paused -(resume)-> running", "status", "paused", "running"),
    ("ccw-loop", "running -(stop)-> failed", "status", "running", "failed"),
    ("ccw-loop", "paused -(stop)-> failed", "status", "paused", "failed"),
    ("ccw-loop", "created -(stop)-> failed", "status", "created", "failed"),
    ("ccw-loop", "INIT", "state", "created", "init"),
    ("ccw-loop", "INIT -> DEVELOP", "state", "init", "develop"),
    ("ccw-loop", "DEVELOP -> VALIDATE", "state", "develop", "validate"),
    ("ccw-loop", "VALIDATE (failed) -> DEBUG", "state", "validate", "debug"),
    ("ccw-loop", "DEBUG -> DEVELOP (fix)", "state", "debug", "develop"),
    ("ccw-loop", "VALIDATE (passed) -> COMPLETE", "state", "validate", "completed"),
    ("ccw-loop", "menu exit -> user_exit", "state", "menu", "user_exit"),
]


@pytest.mark.parametrize(
    ("machine", "seed_edge", "layer", "source", "dest"),
    SEED_EDGES,
    ids=[f"{m}: {e}" for m, e, *_ in SEED_EDGES],
)
def test_seed_edge_is_drawn(
    machine: str, seed_edge: str, layer: str, source: str, dest: str
) -> None:
    """The seed's edge is an edge of our diagram between the mapped states."""
    model = diagram_model(open_machine(machine))
    drawn = {(e.layer, e.source, e.dest) for e in model.edges}
    assert (layer, source, dest) in drawn, f"{machine}: seed edge '{seed_edge}' is not drawn"
