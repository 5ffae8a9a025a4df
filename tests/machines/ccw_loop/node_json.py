"""The CCW dashboard's writing of a master file, emulated exactly: ``JSON.parse`` of the file,
the change, ``updated_at`` set, then ``JSON.stringify(loop, null, 2)`` written in place.

``JSON.stringify`` knows one kind of number: a float with no fraction is written as an integer
(``0.0`` becomes ``0``, ``1e16`` becomes ``10000000000000000``), and it writes no newline at the
end. Everything else it writes as ``json.dumps(..., indent=2, ensure_ascii=False)`` does (key
order kept, the same escapes). ``tests/machines/ccw_loop/test_dashboard_journal.py`` checks this
against ``node`` itself when it is installed.

Run as a program (``python node_json.py MASTER OPERATION [VALUE]``) it is the dashboard pressing
a button while a step runs: it imports nothing of fsm.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

NOW = "2026-01-01T00:30:00.000Z"
"""The dashboard's clock (``new Date().toISOString()``)."""


def js_numbers(value: Any) -> Any:
    """``value`` with the numbers JSON.stringify writes as integers turned into ints."""
    kind = type(value)
    if kind is float and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if kind is dict:
        return {key: js_numbers(item) for key, item in value.items()}
    if kind is list:
        return [js_numbers(item) for item in value]
    return value


def stringify(value: Any) -> str:
    """``JSON.stringify(value, null, 2)``."""
    return json.dumps(js_numbers(value), indent=2, ensure_ascii=False)


def dashboard_writes(master: Path, **changes: Any) -> dict[str, Any]:
    """What the dashboard does on a button press or an edit: read, change, set ``updated_at``,
    rewrite in place; the loop as written."""
    loop = json.loads(master.read_text(encoding="utf-8"))
    loop.update(changes)
    loop["updated_at"] = NOW
    with master.open("w", encoding="utf-8") as handle:
        handle.write(stringify(loop))
    return loop


BUTTONS: dict[str, dict[str, Any]] = {
    "pause": {"status": "paused"},
    "resume": {"status": "running"},
    "stop": {
        "status": "failed",
        "failure_reason": "Manually stopped by user",
        "completed_at": NOW,
    },
}


if __name__ == "__main__":
    dashboard_writes(Path(sys.argv[1]), **BUTTONS[sys.argv[2]])
