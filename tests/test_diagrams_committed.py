"""The committed diagrams in diagrams/ are what the current definitions produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm.model.discovery import open_machine, registered_machines
from fsm.view.diagram import to_dot, to_mermaid

DIAGRAMS = Path(__file__).parent.parent / "diagrams"
MACHINES = sorted(registered_machines())
REGENERATE = "stale: run 'fsm diagram' (or the demo) and commit diagrams/"


@pytest.mark.parametrize("name", MACHINES)
def test_committed_dot_and_mermaid_are_current(name: str) -> None:
    """diagrams/<machine>.dot and .mmd equal the text generated from the definition."""
    machine = open_machine(name)
    assert (DIAGRAMS / f"{name}.dot").read_text(encoding="utf-8") == to_dot(machine), REGENERATE
    assert (DIAGRAMS / f"{name}.mmd").read_text(encoding="utf-8") == to_mermaid(machine), REGENERATE


@pytest.mark.parametrize("name", MACHINES)
def test_committed_images_exist(name: str) -> None:
    """Every machine has its SVG and PNG committed next to the DOT file."""
    for suffix in ("svg", "png"):
        path = DIAGRAMS / f"{name}.{suffix}"
        assert path.exists() and path.stat().st_size > 0, REGENERATE


def test_every_bundled_machine_is_checked_clean() -> None:
    """`fsm check` finds nothing in any registered machine."""
    from fsm.model.check import check_all

    findings = [f.render() for report in check_all() for f in report.findings]
    assert findings == []
