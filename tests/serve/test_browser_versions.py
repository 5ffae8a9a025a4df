"""The list page flags an instance the installed definition runs under another version: one it
cannot run (an older version with no migration) in the failure colour, with the reason on hover
(issue 30: serve shows the version and flags what the installed code cannot run)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from tests.conftest import COUNTER
from tests.serve.conftest import ServeProcess, launch_serve, stop_serve
from tests.serve.test_browser import WAIT_MS, browser

__all__ = ["browser"]  # the module-scoped fixture, shared

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    path = tmp_path_factory.mktemp("versions")
    folder = path / "machines" / "counter"
    shutil.copytree(COUNTER.parent, folder)
    definition = folder / "machine.yaml"
    Workspace(path).instance(load_machine(definition), "old").create({"limit": 2})
    text = definition.read_text()
    assert "version: 1\n" in text
    definition.write_text(text.replace("version: 1\n", "version: 2\n", 1))  # no migration
    Workspace(path).instance(load_machine(definition), "new").create({"limit": 2})
    serve = launch_serve(path, str(definition))
    yield serve
    stop_serve(serve.process)


def test_an_instance_the_installed_version_cannot_run_is_flagged(
    browser: Browser, server: ServeProcess
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto(server.url)
        page.wait_for_selector("tr[data-id='old'] .version-note", timeout=WAIT_MS)
        note = page.locator("tr[data-id='old'] .version-note")
        assert note.inner_text().strip() == "v1 (cannot run)"
        assert "bad-text" in (note.get_attribute("class") or "")
        assert "has no migration from it" in (note.get_attribute("title") or "")
        assert page.locator("tr[data-id='new'] .version-note").count() == 0
    finally:
        context.close()
