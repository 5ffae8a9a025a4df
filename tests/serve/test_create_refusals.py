"""`POST /api/instances/{machine}` refuses what `fsm new` refuses: fields fsm owns, and inputs
larger than a document, with nothing written."""

from __future__ import annotations

import pytest

from tests.serve.conftest import Api


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        pytest.param({"limit": 2, "status": "done"}, "status", id="control-status"),
        pytest.param({"limit": 2, "phase": "done"}, "phase", id="fsm-state"),
    ],
)
def test_fields_fsm_owns_are_refused_over_http(
    api: Api, inputs: dict[str, object], field: str
) -> None:
    """`POST /api/instances/counter` with an owned field is a 400 naming it; nothing is written."""
    answer = api.post("/api/instances/counter", {"id": "c1", "inputs": inputs})
    assert answer.status_code == 400
    body = answer.json()
    assert body["exit_code"] == 2 and f"'{field}' cannot be given at creation" in body["error"]
    assert not api.instance("c1").exists()
    assert not (api.workspace.path / ".counters").exists()


def test_a_30_mb_title_is_refused_over_http_and_nothing_is_written(api: Api) -> None:
    """Inputs larger than a document may be are a 413 (exit code 2), before anything is
    written: the instance does not exist and no folder was made."""
    title = "x" * (30 * 1024 * 1024)
    answer = api.post(
        "/api/instances/counter", {"id": "big", "inputs": {"limit": 1, "title": title}}
    )
    assert answer.status_code == 413
    assert answer.json()["exit_code"] == 2
    assert "more than a document may hold (16.0 MiB)" in answer.json()["error"]
    assert not (api.workspace.path / ".counters").exists()
