"""Drive a loop with the real CCW dashboard server and check fsm's journal after each of its writes.

Run on demand, never in CI (it needs node and a CCW checkout, which fsm does not ship):

    python scripts/ccw-dashboard-interop.py --ccw /path/to/Claude-Code-Workflow

``--ccw`` is a checkout of the CCW repository whose dashboard runs (``node ccw/bin/ccw.js serve``
starts: its dependencies installed and its TypeScript built, as issue 32 describes); this script
builds nothing, and only writes the placeholder ``ccw/frontend/dist/index.html`` the server asks
for when the frontend was not built. The server runs on 127.0.0.1 with its own temporary HOME,
serving a temporary workspace: a tiny Python project with a test suite and fsm.toml.

What it does, each dashboard request then ``fsm replay`` and ``fsm history --changes`` (both must
exit 0) and time travel (every version rebuilt from the journal: exactly, or, for a version the
dashboard wrote, to fsm's fields); the first failure ends the script with exit 1:

1. the dashboard creates a loop (``POST /api/loops/v2``) and adds its tasks (``POST .../tasks``);
2. ``fsm run`` drives it; while its second task runs, the dashboard pauses it (``POST
   .../pause``): fsm run ends paused;
3. the dashboard edits the paused loop (``PUT``: title, description, max_iterations) and resumes
   it (``POST .../resume``); ``fsm run`` drives it to completed;
4. the dashboard saves the completed loop again (``PUT``: title), then once more unchanged;
5. a second loop is stopped by the dashboard while created (``POST .../stop``).

It prints one line per check and a last line with the count.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MACHINE = "ccw-loop"
PROJECT = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


class Failed(Exception):
    """A check that did not hold."""


class Dashboard:
    """The CCW dashboard server, started on a free port of 127.0.0.1."""

    def __init__(self, ccw: Path, workspace: Path, home: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        placeholder = ccw / "ccw" / "frontend" / "dist" / "index.html"
        if not placeholder.exists():
            placeholder.parent.mkdir(parents=True, exist_ok=True)
            placeholder.write_text("<!doctype html><title>placeholder</title>\n")
        command = [
            "node",
            str(ccw / "ccw" / "bin" / "ccw.js"),
            "serve",
            "--path",
            str(workspace),
            "--port",
            str(self.port),
            "--host",
            "127.0.0.1",
            "--no-browser",
        ]
        env = {**os.environ, "HOME": str(home), "NO_COLOR": "1"}
        self.log = (home / "dashboard.log").open("w")
        self.process = subprocess.Popen(
            command, cwd=workspace, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self.token = self._wait_for_token()

    def _wait_for_token(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Failed(f"the dashboard exited with {self.process.returncode}: see its log")
            try:
                with urllib.request.urlopen(f"{self.base}/api/auth/token", timeout=2) as answer:
                    return str(json.load(answer)["token"])
            except (OSError, ValueError, KeyError):
                time.sleep(0.3)
        raise Failed("the dashboard did not answer within 60 s")

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One API request; its ``data`` (Failed when it was refused)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                reply = json.load(answer)
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            raise Failed(f"{method} {path}: {exc.code} {text}") from exc
        if isinstance(reply, dict) and reply.get("success") is False:
            raise Failed(f"{method} {path}: {reply.get('error')}")
        return reply.get("data", reply) if isinstance(reply, dict) else reply

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class Check:
    """fsm on the workspace: replay and history after each dashboard write."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.count = 0

    def fsm(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "fsm", "-C", str(self.workspace), *argv]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )

    def journal(self, loop_id: str, after: str) -> None:
        """`fsm replay` and `fsm history --changes` of ``loop_id`` exit 0."""
        for argv in (("replay", MACHINE, loop_id), ("history", MACHINE, loop_id, "--changes")):
            done = self.fsm(*argv)
            self.count += 1
            shown = (done.stdout.strip().splitlines() or [""])[-1]
            print(
                f"{'ok  ' if done.returncode == 0 else 'FAIL'} after {after}: fsm {argv[0]}: "
                f"{done.stderr.strip() or shown}"
            )
            if done.returncode != 0:
                raise Failed(f"fsm {argv[0]} exited {done.returncode} after {after}")
        verdicts = self.rebuilt(loop_id)
        self.count += 1
        wrong = {v: n for v, n in verdicts.items() if v not in ("exact", "foreign")}
        print(
            f"{'FAIL' if wrong else 'ok  '} after {after}: time travel: {verdicts or 'no record'}"
        )
        if wrong:
            raise Failed(f"versions not rebuilt after {after}: {wrong}")

    def rebuilt(self, loop_id: str) -> dict[str, int]:
        """How each version of the journal rebuilds (:mod:`fsm.model.rebuild`), counted."""
        from fsm.engine.instance import Workspace
        from fsm.model.rebuild import Rebuilder

        instance = Workspace(self.workspace).instance(MACHINE, loop_id)
        rules = instance.rules
        rebuilder = Rebuilder(lambda data: rules.render(data, loop_id), rules.core_matches)
        verdicts: dict[str, int] = {}
        for number, record in enumerate(instance.journal.records(), start=1):
            rebuilder.follow(number, record)
            verdict = rebuilder.check(record).verdict
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        return verdicts


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _workspace(folder: Path) -> Path:
    workspace = folder / "ws"
    for name, text in PROJECT.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    pytest = f"{sys.executable} -m pytest -q -p no:cacheprovider"
    (workspace / "fsm.toml").write_text(
        f'[machine.ccw-loop]\ntest_command = "{pytest}"\nfix_tool = "none"\n'
    )
    return workspace


def _task(description: str, command: str) -> dict[str, Any]:
    return {
        "description": description,
        "tool": "bash",
        "mode": "write",
        "prompt_template": description,
        "command": command,
        "on_error": "continue",
    }


def _wait_for(path: Path, run: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if run.poll() is not None:
            raise Failed(f"fsm run ended before its task started: {run.communicate()}")
        if time.monotonic() > deadline:
            raise Failed(f"{path} did not appear")
        time.sleep(0.05)


def scenario(dashboard: Dashboard, check: Check, workspace: Path) -> None:
    loop = dashboard.call(
        "POST", "/api/loops/v2", {"title": "Add mul", "description": "calc gets mul"}
    )
    loop_id = loop["loop_id"]
    base = f"/api/loops/v2/{loop_id}"
    marker = workspace / "second-task-started"
    dashboard.call(
        "POST",
        f"{base}/tasks",
        _task("Add mul", "printf '\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py"),
    )
    dashboard.call("POST", f"{base}/tasks", _task("Wait", f"touch {marker} && sleep 3"))
    check.journal(loop_id, "the dashboard created the loop and its tasks")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [sys.executable, "-m", "fsm", "-C", str(workspace), "run", MACHINE, loop_id, "-q"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(marker, run)
    dashboard.call("POST", f"{base}/pause")
    out, err = run.communicate(timeout=300)
    print(f"     fsm run after the dashboard's pause: exit {run.returncode} {err.strip()}")
    if run.returncode != 5:
        raise Failed(f"fsm run did not end paused (exit {run.returncode}): {out} {err}")
    check.journal(loop_id, "the dashboard paused it during a step")
    dashboard.call(
        "PUT", base, {"title": "Add mul, renamed", "description": "edited", "max_iterations": 12}
    )
    check.journal(loop_id, "the dashboard edited the paused loop")
    dashboard.call("POST", f"{base}/resume")
    check.journal(loop_id, "the dashboard resumed it")
    done = check.fsm("run", MACHINE, loop_id, "-q")
    print(f"     fsm run after the resume: exit {done.returncode} {done.stderr.strip()}")
    if done.returncode != 0:
        raise Failed(f"fsm run did not complete the loop: {done.stdout} {done.stderr}")
    check.journal(loop_id, "fsm run completed it")
    final = dashboard.call("GET", base)
    if final["status"] != "completed" or final["title"] != "Add mul, renamed":
        raise Failed(f"the dashboard reads {final['status']} / {final['title']}")
    dashboard.call("PUT", base, {"title": "Add mul, done"})
    check.journal(loop_id, "the dashboard saved the completed loop with a new title")
    dashboard.call("PUT", base, {})
    check.journal(loop_id, "the dashboard saved the completed loop unchanged")
    other = dashboard.call("POST", "/api/loops/v2", {"title": "Never run"})
    check.journal(other["loop_id"], "the dashboard created a second loop")
    dashboard.call("POST", f"/api/loops/v2/{other['loop_id']}/stop")
    check.journal(other["loop_id"], "the dashboard stopped the created loop")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ccw", type=Path, required=True, help="a CCW checkout whose dashboard runs"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    args = parser.parse_args()
    if shutil.which("node") is None:
        print("ccw-dashboard-interop: node is not installed", file=sys.stderr)
        return 2
    if not (args.ccw / "ccw" / "bin" / "ccw.js").is_file():
        print(f"ccw-dashboard-interop: {args.ccw} has no ccw/bin/ccw.js", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="fsm-ccw-interop-"))
    home = folder / "home"
    home.mkdir()
    workspace = _workspace(folder)
    check = Check(workspace)
    dashboard = Dashboard(args.ccw.resolve(), workspace, home)
    try:
        scenario(dashboard, check, workspace)
    except Failed as exc:
        print(f"FAIL {exc} (workspace: {workspace}, dashboard log: {home / 'dashboard.log'})")
        args.keep = True
        return 1
    finally:
        dashboard.stop()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{check.count} checks after the dashboard's writes: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
