"""The pages as a person uses them: a real headless Chromium (Playwright on Debian's chromium)
against a real ``fsm serve``, while ``fsm run`` drives an instance in another process.

Screenshots of each page are written to ``$FSM_SCREENSHOTS`` (default: ``build/screenshots``);
``docs/screenshots`` holds the committed ones (``FSM_SCREENSHOTS=docs/screenshots``).
``scripts/browser-deps.sh`` (run by ``scripts/test.sh``) installs what these tests need.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from tests.conftest import COUNTER
from tests.serve.conftest import (
    ROOT,
    ServeProcess,
    fsm_env,
    launch_serve,
    stop_serve,
    with_agent_run,
)

CHROMIUM = os.environ.get("FSM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(os.environ.get("FSM_SCREENSHOTS", ROOT / "build" / "screenshots"))
WAIT_MS = 15_000
pytestmark = pytest.mark.slow


def missing() -> list[str]:
    """What the browser tests need and this machine lacks."""
    found = []
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        found.append(f"{CHROMIUM} (Debian package chromium: apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        found.append(f"Playwright for Python (pip install -e '.[browser]' into {sys.prefix})")
    return found


def _required_here() -> bool:
    """On CI as root on Debian, scripts/browser-deps.sh installs everything: never skip there."""
    return bool(os.environ.get("CI")) and os.geteuid() == 0 and shutil.which("apt-get") is not None


if missing():
    reason = "browser tests need " + " and ".join(missing()) + "; run scripts/browser-deps.sh"
    if _required_here():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402

JS_CURRENT_STATE = """() => {
  const svg = document.querySelector('#diagram svg');
  if (!svg) return null;
  for (const node of svg.querySelectorAll('g.node')) {
    const shape = node.querySelector('path, polygon');
    const current = shape && shape.getAttribute('fill') === '#ffd54f';
    if (current) return node.querySelector('title').textContent;
  }
  return null;
}"""
STATUS = "() => document.querySelector('#status').textContent"
DRIVER = "() => document.getElementById('driver').textContent"
JS_ROWS = """() => [...document.querySelectorAll('#journal tr')].map(
  (row) => [...row.cells].map((cell) => cell.textContent))"""
"""The journal's rows, newest first, each the text of its cells (time, kind, event, move,
changed, actions, actor, duration, reason): textContent, which does not depend on layout."""
JS_CHANGED = """() => [...document.querySelectorAll('#journal tr.kind-transition ul.changes')]
  .map((list) => list.textContent)"""
JS_DOCUMENT_VALUE = """(key) => {
  for (const line of document.querySelectorAll('#document > details > div > .json-line')) {
    const label = line.querySelector('.json-key');
    if (label && label.textContent === key + ': ') return line.lastChild.textContent;
  }
  return null;
}"""
JS_ROW_LINE = """(text) => {
  for (const row of document.querySelectorAll('#journal tr')) {
    if (row.cells[4] && row.cells[4].textContent.includes(text)) return Number(row.dataset.line);
  }
  return null;
}"""
TRAVEL_SHOWN = "() => !document.getElementById('travel').hidden"
SUMMARY_TOP = "() => document.getElementById('summary').getBoundingClientRect().top"
JS_VISITS = """(state) => {
  for (const node of document.querySelectorAll('#diagram svg g.node')) {
    if (node.querySelector('title').textContent !== state) continue;
    const texts = [...node.querySelectorAll('text')].map((t) => t.textContent);
    const count = texts.find((t) => t.startsWith('×'));
    return count ? Number(count.slice(1)) : null;
  }
  return null;
}"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Counters in every situation: one to run slowly, one done, one failed."""
    path = tmp_path_factory.mktemp("browser")
    workspace = Workspace(path)
    counter = load_machine(COUNTER)
    workspace.instance(counter, "slow").create({"limit": 100_000})
    done = workspace.instance(counter, "finished")
    done.create({"limit": 2})
    Engine(done).run()
    assert done.load().state == "done"
    broken = workspace.instance(counter, "broken")
    broken.create({"limit": 5, "fail_at": 1, "max_errors": 1})
    Engine(broken).run()
    assert broken.load().state == "failed"
    loop = workspace.instance("ccw-loop", "loop-v2-20260101T000000-0a1b2c3d")
    loop.create({"title": "Fix the parser", "description": "Make the parser tests pass"})
    return path


@pytest.fixture(scope="module")
def server(workspace: Path) -> Iterator[ServeProcess]:
    serve = launch_serve(workspace, str(COUNTER), "ccw-loop")
    yield serve
    stop_serve(serve.process)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, server: ServeProcess) -> Iterator[Page]:
    """A page logged in with the token the server printed (its address, as a person opens it)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on(
        "console",
        lambda message: errors.append(message.text) if message.type == "error" else None,
    )
    opened.goto(server.url)
    assert "token=" not in opened.url  # the token went into a cookie, out of the address
    yield opened
    context.close()
    assert errors == []


def wait_until(page: Page, script: str, expected: Any, arg: Any = None) -> Any:
    """Poll ``script`` (a function) in the page until it returns ``expected`` (or, when
    ``expected`` is callable, a value it accepts). Playwright's own wait_for_function would
    evaluate a string, which the pages' Content-Security-Policy forbids."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while True:
        value = page.evaluate(script, arg)
        if expected(value) if callable(expected) else value == expected:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT_MS} ms for {expected!r}; last value {value!r}")
        time.sleep(0.1)


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_instances_page_lists_filters_and_explains_failures(page: Page) -> None:
    """Every instance is listed with state, status and progress; the failed one says why;
    the status filter narrows the list."""
    page.wait_for_selector("tr[data-id='broken']", timeout=WAIT_MS)
    ids = page.eval_on_selector_all("#rows tr", "rows => rows.map(r => r.dataset.id)")
    assert set(ids) == {"slow", "finished", "broken", "loop-v2-20260101T000000-0a1b2c3d"}
    broken = page.locator("tr[data-id='broken']")
    assert "failure" in broken.inner_text()
    assert "failed" in broken.inner_text()
    assert "progress 1/5" in broken.inner_text()
    shot(page, "instances")
    page.select_option("#filter-status", "failed")
    wait_until(page, "() => document.querySelectorAll('#rows tr').length", 1)
    assert page.locator("#rows tr").get_attribute("data-id") == "broken"
    assert "status=failed" in page.url


def run_slow(workspace: Path, *extra: str) -> subprocess.Popen[str]:
    """``fsm run`` of the slow counter in another process, 0.2 s per step."""
    argv = ["-C", str(workspace), "-o", "delay=0.2", "run", str(COUNTER), "slow", "-q", *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "fsm", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=fsm_env(),
    )


def buttons(page: Page) -> list[str]:
    result: Any = page.eval_on_selector_all(
        "#control-buttons button", "buttons => buttons.map(b => b.textContent)"
    )
    return list(result)


def test_instance_page_follows_a_run_and_controls_it(
    page: Page, server: ServeProcess, workspace: Path
) -> None:
    """The diagram follows a run in another process without a reload; Pause stops that run
    (exit 5), Resume makes it running again; only legal commands are offered."""
    page.goto(f"{server.base}/instances/counter/slow")
    wait_until(page, JS_CURRENT_STATE, "idle")
    assert buttons(page) == ["Start", "Stop"]
    page.evaluate("window.notReloaded = true")
    run = run_slow(workspace)
    try:
        wait_until(page, JS_CURRENT_STATE, "counting")
        seen = page.evaluate(JS_VISITS, "counting")
        wait_until(page, JS_VISITS, lambda count: count > seen, "counting")
        assert page.evaluate("window.notReloaded") is True
        assert page.inner_text("#status") == "running"
        page.wait_for_selector("#control-pause", timeout=WAIT_MS)
        assert buttons(page) == ["Pause", "Stop"]
        # Who drives it: the run's heartbeat; each journal row says what its step changed.
        wait_until(page, DRIVER, lambda text: text.startswith("driven by run (pid "))
        wait_until(page, JS_CHANGED, lambda lists: any("~ /count = " in t for t in lists))
        shot(page, "instance")
        page.click("#control-pause")
        assert run.wait(timeout=30) == 5
    finally:
        if run.poll() is None:
            run.kill()
        run.communicate()
    wait_until(page, STATUS, "paused")
    nobody = wait_until(
        page, DRIVER, lambda text: text.startswith("nobody is driving this instance")
    )
    assert nobody.endswith(f"run {COUNTER} slow would"), nobody
    page.wait_for_selector("#control-resume", timeout=WAIT_MS)
    assert buttons(page) == ["Start", "Resume", "Stop"]
    # The pause is journaled as the server's (its actor is serve, whatever the client says).
    rows = wait_until(
        page, JS_ROWS, lambda rows: any(r[2] == "pause" and r[6] == "serve" for r in rows[:5])
    )
    pause = next(row for row in rows if row[2] == "pause")
    assert pause[3] == "running → paused", pause
    shot(page, "instance-paused")
    page.click("#control-resume")
    wait_until(page, STATUS, "running")
    assert buttons(page) == ["Pause", "Stop"]
    assert page.evaluate("window.notReloaded") is True
    instance = Workspace(workspace).instance(load_machine(COUNTER), "slow")
    assert instance.load().status == "running"
    ControlPlane(instance).apply("stop", reason="test over")


def test_a_journal_row_shows_the_instance_as_of_that_step(page: Page, server: ServeProcess) -> None:
    """Clicking a journal row shows the document and the diagram as of that step (rebuilt and
    checked against the recorded hash), kept in the address so that the link opens the same
    view; shift-clicking another row shows the changes between the two (and the later one);
    Back to now shows the current document and diagram again."""
    page.goto(f"{server.base}/instances/counter/finished")
    wait_until(page, JS_CURRENT_STATE, "done")
    assert page.evaluate(JS_DOCUMENT_VALUE, "count") == "2"
    first = wait_until(page, JS_ROW_LINE, lambda line: line is not None, "~ /count = 1")
    second = page.evaluate(JS_ROW_LINE, "~ /count = 2")
    assert second is not None and second > first
    page.click(f"#journal tr[data-line='{first}'] td:nth-child(4)")
    wait_until(page, TRAVEL_SHOWN, True)
    wait_until(page, JS_DOCUMENT_VALUE, "1", "count")
    wait_until(page, JS_CURRENT_STATE, "counting")
    assert page.inner_text("#travel-line") == str(first)
    assert page.text_content("#travel-check") == (
        "rebuilt from the journal's changes; it has the recorded hash"
    )
    assert page.text_content("#diagram-when") == f"as of line {first}"
    assert f"line={first}" in page.url
    # The changes from the step before it are listed with it, each value before and after.
    assert "~ /count: 0 → 1" in (page.text_content("#travel-changes") or "")
    # The summary card moves with it (the instance is done now, counting then), and the page
    # scrolled to it.
    assert page.inner_text("#state") == "counting"
    assert page.inner_text("#summary-when").startswith(f"As of journal line {first}")
    wait_until(page, SUMMARY_TOP, lambda top: -5 <= top <= 60)
    page.click(f"#journal tr[data-line='{second}'] td:nth-child(4)", modifiers=["Shift"])
    wait_until(
        page,
        "() => document.getElementById('travel-changes').textContent",
        lambda text: (
            text.startswith(f"Changes from line {first} to line {second}")
            and "~ /count: 1 → 2" in text
        ),
    )
    wait_until(page, JS_DOCUMENT_VALUE, "2", "count")  # the later of the two is shown
    assert page.inner_text("#travel-line") == str(second)
    assert page.evaluate("window.getSelection().toString()") == ""
    shot(page, "instance-time-travel")
    # The link opens the same view.
    page.goto(f"{server.base}/instances/counter/finished?line={first}")
    wait_until(page, TRAVEL_SHOWN, True)
    wait_until(page, JS_DOCUMENT_VALUE, "1", "count")
    wait_until(page, JS_CURRENT_STATE, "counting")
    page.click("#travel-back")
    wait_until(page, TRAVEL_SHOWN, False)
    wait_until(page, "() => document.getElementById('state').textContent", "done")
    wait_until(page, JS_DOCUMENT_VALUE, "2", "count")
    wait_until(page, JS_CURRENT_STATE, "done")
    assert "line=" not in page.url


def test_instances_are_searched_and_filtered_from_the_address(
    page: Page, server: ServeProcess
) -> None:
    """Words typed in the search narrow the list to the instances whose id, title or reason
    hold them, the outcome filter to those that ended so; every filter is kept in the address,
    and an address with filters opens the page filtered; Clear shows everything again."""
    page.wait_for_selector("tr[data-id='broken']", timeout=WAIT_MS)
    page.fill("#filter-q", "parser")
    rows = "() => [...document.querySelectorAll('#rows tr')].map((r) => r.dataset.id || null)"
    wait_until(page, rows, ["loop-v2-20260101T000000-0a1b2c3d"])
    wait_until(page, "() => location.search", "?q=parser")
    page.fill("#filter-q", "")
    page.select_option("#filter-outcome", "failure")
    # The slow counter may have been stopped (a failure) by an earlier test.
    wait_until(page, rows, lambda ids: "broken" in ids and set(ids) <= {"broken", "slow"})
    assert "outcome=failure" in page.url
    page.goto(f"{server.base}/?machine=counter&outcome=success")
    wait_until(page, rows, ["finished"])
    assert page.input_value("#filter-outcome") == "success"
    assert page.input_value("#filter-machine") == "counter"
    page.goto(f"{server.base}/?q=nothing-has-this")
    wait_until(page, "() => document.getElementById('rows').textContent", "No instance matches.")
    page.click("#filter-clear")
    wait_until(page, "() => document.querySelectorAll('#rows tr[data-id]').length", 4)
    assert page.evaluate("location.search") == ""


def test_the_driver_line_shows_the_action_in_progress_and_its_age(
    page: Page, server: ServeProcess, workspace: Path
) -> None:
    """While a run's action is under way the driver line names it and how long it has run,
    the seconds growing without a reload; when the run ended, the line says nothing drives it."""
    instance = Workspace(workspace).instance(load_machine(COUNTER), "long")
    instance.create({"limit": 1})
    page.goto(f"{server.base}/instances/counter/long")
    wait_until(page, DRIVER, lambda text: text.startswith("nobody is driving this instance"))
    argv = ["-C", str(workspace), "-o", "delay=6", "run", str(COUNTER), "long", "-q"]
    run = subprocess.Popen(
        [sys.executable, "-m", "fsm", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=fsm_env(),
    )
    try:
        pattern = re.compile(r"driven by run \(pid (\d+) on .+\), action increment for (\d+) s$")
        first = wait_until(page, DRIVER, lambda text: pattern.match(text) is not None)
        found = pattern.match(first)
        assert found is not None
        assert int(found.group(1)) == run.pid
        wait_until(
            page,
            DRIVER,
            lambda text: (
                (now := pattern.match(text)) is not None and int(now.group(2)) > int(found.group(2))
            ),
        )
        shot(page, "instance-driver")
        assert run.wait(timeout=60) == 0
    finally:
        if run.poll() is None:
            run.kill()
        run.communicate()
    wait_until(page, DRIVER, "ended: nothing to drive")


def test_resume_on_the_page_is_driven_by_a_server_that_drives(
    browser: Browser, tmp_path: Path
) -> None:
    """With ``fsm serve --drive`` and nothing else running, a paused instance is left alone and
    the page says the server drives it once runnable; Resume on the page makes the server drive
    it (the driver line names serve) to its end."""
    (tmp_path / "fsm.toml").write_text("[machine.counter]\ndelay = 0.5\n")
    instance = Workspace(tmp_path).instance(load_machine(COUNTER), "by-server")
    instance.create({"limit": 4})
    ControlPlane(instance).apply("start")
    ControlPlane(instance).apply("pause", reason="not yet")
    serve = launch_serve(tmp_path, str(COUNTER), "--drive")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        opened = context.new_page()
        opened.goto(serve.url)
        opened.goto(f"{serve.base}/instances/counter/by-server")
        wait_until(opened, STATUS, "paused")
        wait_until(opened, DRIVER, lambda text: "this server (fsm serve --drive) drives it" in text)
        opened.click("#control-resume")
        wait_until(opened, DRIVER, lambda text: text.startswith("driven by serve (pid "))
        wait_until(opened, JS_CURRENT_STATE, "done")
        wait_until(opened, DRIVER, "ended: nothing to drive")
    finally:
        context.close()
        stop_serve(serve.process)
    assert instance.load().data["count"] == 4


def test_machine_page_renders_its_diagram(page: Page, server: ServeProcess) -> None:
    """The machine page draws the diagram and lists transitions, guards and options."""
    page.goto(f"{server.base}/machines/counter")
    page.wait_for_selector("#diagram svg g.node", timeout=WAIT_MS)
    nodes = page.eval_on_selector_all(
        "#diagram svg g.node title", "titles => titles.map(t => t.textContent)"
    )
    assert {"idle", "counting", "done", "failed"} <= set(nodes)
    assert page.locator("#transitions tr").count() == 4
    assert "not below_limit" in page.inner_text("#transitions")
    assert "delay" in page.inner_text("#options")
    assert page.locator("#schema details").count() > 0
    shot(page, "machine")
    page.goto(f"{server.base}/machines/ccw-loop")
    page.wait_for_selector("#diagram svg g.node", timeout=WAIT_MS)
    width = page.evaluate("document.querySelector('#diagram svg').getBoundingClientRect().width")
    assert width <= 1280
    shot(page, "machine-ccw-loop")


def test_instance_page_shows_the_agent_runs(
    page: Page, server: ServeProcess, workspace: Path
) -> None:
    """The latest agent run is on the instance page (agent, version, mode, how it ended, the
    files it changed, its tokens), each step's runs in the journal, the final message behind a
    toggle. (Last in this file: it adds an instance to the workspace.)"""
    instance = Workspace(workspace).instance(load_machine(COUNTER), "agent-ran")
    instance.create({"limit": 1})
    Engine(instance).run()
    with_agent_run(instance)
    page.goto(f"{server.base}/instances/counter/agent-ran")
    page.wait_for_selector("#agent .agent", timeout=WAIT_MS)
    summary = (
        "codex 0.169.0 (write) completed; changed calc.py; 1200 tokens in (200 cached), 345 out"
    )
    assert page.inner_text("#agent .agent-run") == summary
    journal = page.eval_on_selector_all("#journal tr", "rows => rows.map(r => r.innerText)")
    assert summary in journal[0]
    page.click("#agent details summary")
    assert page.inner_text("#agent details pre") == "Added div to calc.py."
    shot(page, "instance-agent")
