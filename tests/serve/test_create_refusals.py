"""`POST /api/instances/{machine}` refuses what `fsm new` refuses: fields fsm owns, and inputs
larger than a document, with nothing written."""

from __future__ import annotations

import pytest

from fsm.base import jsonio
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
    """A body larger than the server takes is a 413 (exit code 2) before it is read: the
    instance does not exist and no folder was made."""
    title = "x" * (30 * 1024 * 1024)
    answer = api.post(
        "/api/instances/counter", {"id": "big", "inputs": {"limit": 1, "title": title}}
    )
    assert answer.status_code == 413
    assert answer.json()["exit_code"] == 2
    assert "larger than this server takes (1048576 bytes" in answer.json()["error"]
    assert not (api.workspace.path / ".counters").exists()


def test_a_document_over_the_store_limit_is_refused_and_nothing_is_written(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create whose inputs are within the limit but whose document, as written (indented),
    would be larger than a document may be is a 413; nothing is written."""
    monkeypatch.setattr(jsonio, "MAX_BYTES", 4096)
    inputs = {"limit": 1, "title": "x" * 2000, "errors": [{}] * 400}
    answer = api.post("/api/instances/counter", {"id": "big", "inputs": inputs})
    assert answer.status_code == 413, answer.text
    assert "its document would be" in answer.json()["error"]
    assert not api.instance("big").exists()
