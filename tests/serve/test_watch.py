"""The change feed: the file store's paths to instances, and what a slow subscriber is told."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fsm.engine.instance import Workspace
from fsm.model.discovery import open_machine
from fsm.model.machine import load_machine
from fsm.serve.watch import Change, ChangeFeed, sources_of
from fsm.store.file_store import FileStore
from fsm.store.file_watch import ids_of
from tests.conftest import COUNTER


@pytest.fixture
def feed(tmp_path: Path) -> ChangeFeed:
    workspace = Workspace(tmp_path)
    machines = [load_machine(COUNTER), open_machine("issue-manager"), open_machine("ccw-loop")]
    return ChangeFeed(sources_of(workspace, machines))


def _changes_of(feed: ChangeFeed, paths: list[str]) -> set[Change]:
    """The instances the file stores of ``feed`` say the changed ``paths`` belong to."""
    found = set()
    for machine, store in feed.sources:
        assert isinstance(store, FileStore)
        found |= {Change(machine, i) for i in ids_of(store.watched(), paths)}
    return found


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        pytest.param(".counters/c1.json", {Change("counter", "c1")}, id="counter-document"),
        pytest.param(
            ".counters/c1.fsm/journal.ndjson", {Change("counter", "c1")}, id="counter-journal"
        ),
        pytest.param(".counters/c1.fsm/log.ndjson", set(), id="log-is-no-change"),
        pytest.param(".counters/.c1.json.4242.1700000000.tmp", set(), id="temporary-file"),
        pytest.param(".counters/c1.json.bak", set(), id="other-suffix"),
        pytest.param(
            ".workflow/.scratchpad/im-1/state.json",
            {Change("issue-manager", "im-1")},
            id="scratchpad-document",
        ),
        pytest.param(
            ".workflow/.loop/loop-v2-x.json", {Change("ccw-loop", "loop-v2-x")}, id="loop-document"
        ),
        pytest.param(
            ".workflow/.loop/loop-v2-x.fsm/journal.ndjson",
            {Change("ccw-loop", "loop-v2-x")},
            id="loop-journal",
        ),
        pytest.param("elsewhere/c1.json", set(), id="outside-the-folders"),
    ],
)
def test_paths_map_to_their_instances(
    feed: ChangeFeed, tmp_path: Path, relative: str, expected: set[Change]
) -> None:
    """Documents and journals are changes of their instance; logs and other files are not."""
    assert _changes_of(feed, [str(tmp_path.resolve() / relative)]) == expected


def test_watched_folders_are_the_instance_folders(feed: ChangeFeed, tmp_path: Path) -> None:
    """The watcher follows the folders holding instances, not the whole workspace."""
    roots = {
        root.relative_to(tmp_path.resolve())
        for _, store in feed.sources
        for _, root in store.watched()  # type: ignore[attr-defined]
    }
    assert roots == {Path(".counters"), Path(".workflow/.scratchpad"), Path(".workflow/.loop")}


def test_a_full_queue_is_told_to_reload_everything(feed: ChangeFeed) -> None:
    """A page that fell behind gets one 'reload everything' instead of the changes it missed."""

    async def scenario() -> list[Change | None]:
        queue = feed.subscribe()
        feed.publish(Change("counter", f"c{n}") for n in range(300))
        drained: list[Change | None] = []
        while not queue.empty():
            drained.append(queue.get_nowait())
        feed.close()
        drained.append(await queue.get())
        return drained

    drained = asyncio.run(scenario())
    assert Change() in drained
    assert len(drained) <= 257
    assert drained[-1] is None  # then the server stopped
