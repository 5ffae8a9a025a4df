"""The server keeps no more than the documents it shows in memory."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

from fsm.serve.views import Filters, instance_rows
from tests.serve.conftest import make_served

DOCUMENTS = 200
DOCUMENT_BYTES = 50_000


def test_listing_holds_one_document_at_a_time_and_keeps_none(tmp_path: Path) -> None:
    """Listing 200 documents of 50 kB (10 MB) to show 5 of them never holds more than a few
    documents' worth of memory, and nothing of them is kept once the answer is made."""
    served = make_served(tmp_path)
    folder = tmp_path / ".counters"
    folder.mkdir()
    padding = "x" * DOCUMENT_BYTES
    for number in range(DOCUMENTS):
        document = {"status": "running", "phase": "counting", "count": number, "title": padding}
        (folder / f"c{number:03d}.json").write_text(json.dumps(document))
    # warm up: imports, schemas, the store
    instance_rows(served, Filters(machine="counter"), limit=5)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        listing = instance_rows(served, Filters(machine="counter"), limit=5)
        peak = tracemalloc.get_traced_memory()[1] - before
        total, shown = listing["total"], [row["title"] for row in listing["rows"]]
        del listing  # the answer holds the 5 rows' titles (50 kB each here): the caller's
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before - sum(map(len, shown))
    finally:
        tracemalloc.stop()
    assert total == DOCUMENTS
    assert shown == [padding] * 5
    assert peak < 10 * DOCUMENT_BYTES, f"peak {peak} bytes"
    assert kept < DOCUMENT_BYTES, f"kept {kept} bytes"
