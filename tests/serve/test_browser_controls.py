"""The control room's new controls and views in a real Chromium (as ``test_browser.py``): the
list's titles, sorting, counts and refused filters, its layout at 400 px; firing a manual event,
a machine's own command (ccw-loop's add task) and retry; human durations and the timeline."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from tests.conftest import COUNTER, ENGINE_MACHINES
from tests.serve.conftest import ServeProcess, launch_serve, stop_serve
from tests.serve.test_browser import WAIT_MS, browser, shot, wait_until

__all__ = ["browser"]  # the module-scoped fixture, shared

pytestmark = pytest.mark.slow
JUDGED = ENGINE_MACHINES / "judged" / "machine.yaml"
LOOP = "loop-v2-20260101T000000-0a1b2c3d"
ROWS = "() => [...document.querySelectorAll('#rows tr')].map((r) => r.dataset.id)"
COUNT_ONCE = """async () => {
  const path = location.pathname.replace('/instances', '/api/instances') + '/events/count';
  await fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'});
}"""
FIRE_ENABLED = """() => { const b = document.getElementById('fire-spoil');
  return b !== null && !b.disabled; }"""
JOURNAL_KINDS = (
    "() => [...document.querySelectorAll('#journal tr')].map((r) => r.cells[1].textContent)"
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("controls")
    workspace = Workspace(path)
    counter = load_machine(COUNTER)
    for name, title in (("alpha", "Zebra crossing"), ("beta", "Apple pie")):
        workspace.instance(counter, name).create({"limit": 3, "title": title})
    done = workspace.instance(counter, "gamma")
    done.create({"limit": 1})
    Engine(done).run()
    judged = load_machine(JUDGED)
    flaky = path / "flaky.sh"
    flaky.write_text(f'#!/bin/sh\ntest -e "{path}/fixed"\n')
    flaky.chmod(flaky.stat().st_mode | stat.S_IXUSR)
    build = workspace.instance(judged, "b1")
    build.create(
        {"parts": [{"name": "a", "program": str(flaky)}, {"name": "b", "program": str(flaky)}]}
    )
    Engine(build).run()
    assert build.load().state != "built"
    many = workspace.instance(judged, "b2")  # a reason as long as its failed parts' names
    names = [f"a-part-with-a-rather-long-name-{n:02d}" for n in range(12)]
    many.create({"parts": [{"name": name, "program": str(flaky)} for name in names]})
    Engine(many).run()
    workspace.instance("ccw-loop", LOOP).create({"title": "Fix the parser", "description": "x"})
    return path


@pytest.fixture(scope="module")
def server(workspace: Path) -> Iterator[ServeProcess]:
    serve = launch_serve(workspace, str(COUNTER), "ccw-loop", str(JUDGED))
    yield serve
    stop_serve(serve.process)


def open_page(browser: Browser, server: ServeProcess, width: int = 1280) -> tuple[Page, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(server.url)
    return page, errors


@pytest.fixture
def page(browser: Browser, server: ServeProcess) -> Iterator[Page]:
    opened, errors = open_page(browser, server)
    yield opened
    opened.context.close()
    assert errors == []


def test_the_list_shows_titles_counts_and_sorts_by_a_column(page: Page) -> None:
    page.wait_for_selector("tr[data-id='alpha']", timeout=WAIT_MS)
    assert page.inner_text("tr[data-id='alpha'] td.col-title") == "Zebra crossing"
    counts = page.eval_on_selector_all(
        "#counts button", "bs => bs.map((b) => [b.dataset.status, b.textContent.trim()])"
    )
    assert dict(counts)["created"].endswith("3")  # alpha, beta and the loop
    page.click("#columns th[data-sort='title'] button")
    wait_until(page, ROWS, lambda ids: ids[:3] == ["beta", LOOP, "alpha"])
    assert "sort=title" in page.url
    page.click("#columns th[data-sort='title'] button")  # again: the other way round
    wait_until(page, ROWS, lambda ids: ids[:3] == ["alpha", LOOP, "beta"])
    assert "sort=-title" in page.url
    done = page.inner_text("#counts button[data-status='done']").split()[-1]
    page.click("#counts button[data-status='done']")  # a count filters by its status
    ids = wait_until(page, ROWS, lambda ids: "gamma" in ids and "alpha" not in ids)
    assert len(ids) == int(done)
    assert "status=done" in page.url


def test_a_long_reason_is_cut_with_the_whole_text_on_hover(
    page: Page, server: ServeProcess
) -> None:
    page.goto(f"{server.base}/?machine=judged")
    page.wait_for_selector("tr[data-id='b2']", timeout=WAIT_MS)
    cell = page.locator("tr[data-id='b2'] td.reason")
    box = cell.bounding_box()
    assert box is not None and box["height"] < 80  # three lines at most
    title = cell.get_attribute("title") or ""
    assert title.endswith("a-part-with-a-rather-long-name-11") and len(title) > 400
    line = 20  # px: a line of text, about
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280
    assert box["height"] < 4 * line


def test_refused_filters_are_an_error_not_every_instance(
    browser: Browser, server: ServeProcess
) -> None:
    page, errors = open_page(browser, server)
    page.goto(f"{server.base}/?status=bogus&machine=nope")
    wait_until(page, "() => document.getElementById('error').textContent", lambda t: "nope" in t)
    assert page.evaluate(ROWS) == [None]  # the one row saying the list was refused
    assert page.input_value("#filter-machine") == "nope"
    assert all("400" in error for error in errors)  # the refused request, nothing else
    page.context.close()


@pytest.mark.parametrize("path", ["/", f"/instances/ccw-loop/{LOOP}", "/instances/counter/gamma"])
def test_pages_fit_400_px(browser: Browser, server: ServeProcess, path: str) -> None:
    page, errors = open_page(browser, server, width=400)
    page.goto(server.base + path)
    page.wait_for_selector("#rows tr, #journal tr", timeout=WAIT_MS)
    wait_until(page, "() => document.documentElement.scrollWidth", lambda w: w <= 400)
    name = "list" if path == "/" else path.rsplit("/", 1)[1][:8]
    shot(page, f"narrow-{name}")
    page.context.close()
    assert errors == []


def test_a_manual_event_is_fired_with_the_reason(page: Page, server: ServeProcess) -> None:
    page.goto(f"{server.base}/instances/counter/alpha")
    page.wait_for_selector("#control-start", timeout=WAIT_MS)
    page.click("#control-start")
    wait_until(page, "() => document.getElementById('status').textContent", "running")
    # spoil is manual, and leaves only counting: no button while idle
    assert page.locator("#fire-spoil").count() == 0
    page.evaluate(COUNT_ONCE)  # fsm fire count, from the page: now counting
    wait_until(page, FIRE_ENABLED, True)
    page.fill("#control-reason", "testing a spoiled batch")
    page.click("#fire-spoil")
    wait_until(
        page,
        "() => document.getElementById('action-error').textContent",
        lambda t: "the step failed" in t,
    )
    wait_until(page, JOURNAL_KINDS, lambda kinds: kinds[0] == "error")
    newest = page.inner_text("#journal tr >> nth=0")
    assert "serve" in newest and "testing a spoiled batch" in newest


def test_add_task_form_appends_the_task(page: Page, server: ServeProcess, workspace: Path) -> None:
    page.goto(f"{server.base}/instances/ccw-loop/{LOOP}")
    page.wait_for_selector("#command-add_task", timeout=WAIT_MS)
    page.fill("#command-add_task input[name='description']", "Add a --verbose flag")
    page.select_option("#command-add_task select[name='tool']", "codex")
    page.fill("#control-reason", "asked by carol")
    page.click("#command-add_task button[type='submit']")
    wait_until(page, JOURNAL_KINDS, lambda kinds: kinds[0] == "command")
    assert "asked by carol" in page.inner_text("#journal tr >> nth=0")
    tasks = workspace / ".workflow" / ".loop" / LOOP / "tasks.jsonl"
    task: dict[str, Any] = json.loads(tasks.read_text().splitlines()[-1])
    assert task["description"] == "Add a --verbose flag" and task["tool"] == "codex"
    assert page.input_value("#command-add_task input[name='description']") == ""
    shot(page, "instance-add-task")


def test_retry_reopens_the_failed_instance(page: Page, server: ServeProcess) -> None:
    page.goto(f"{server.base}/instances/judged/b1")
    page.wait_for_selector("#control-retry", state="visible", timeout=WAIT_MS)
    page.fill("#retry-items", "b")
    page.fill("#control-reason", "fixed the flaky part")
    page.click("#control-retry")
    wait_until(page, JOURNAL_KINDS, lambda kinds: kinds[0] == "retry")
    assert "fixed the flaky part" in page.inner_text("#journal tr >> nth=0")
    wait_until(page, "() => document.getElementById('retry').hidden", True)


def test_durations_read_as_a_person_reads_them_and_the_timeline_travels(
    page: Page, server: ServeProcess
) -> None:
    page.goto(f"{server.base}/instances/counter/gamma")
    page.wait_for_selector("#timeline li.step", timeout=WAIT_MS)
    shown = page.eval_on_selector_all(
        "#journal td.number", "cells => cells.map((c) => c.textContent)"
    )
    assert shown and all(text.endswith((" ms", " s", " min")) for text in shown)
    # "3.9 s", never "3873.597 ms": milliseconds only under a second, one decimal at most
    for text in shown:
        number = text.split()[0]
        assert len(number.partition(".")[2]) <= 1, text
        assert not text.endswith(" ms") or float(number) < 1000, text
    steps = page.eval_on_selector_all(
        "#timeline li.step", "items => items.map((i) => i.dataset.line)"
    )
    assert len(steps) == len(shown)
    page.click(f"#timeline li.step[data-line='{steps[-1]}']")
    wait_until(page, "() => document.getElementById('travel-line').textContent", steps[-1])
