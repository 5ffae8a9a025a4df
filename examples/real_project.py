"""ccw-loop on a real package: is what the loop says about it true?

Downloads a pinned sdist with its tests from PyPI (``inflection`` 0.5.1: one module, 455 tests
that run in about a second), plants a bug in it, and runs a loop on a fresh copy per scenario
with a stand-in fix agent (a small script configured in fsm.toml, as a real agent CLI is):

* ``fixer``: repairs the bug (the tests run through ``./run_tests.sh``, two pytest parts and
  ``exit 1`` if either failed);
* ``idle``: says it fixed it and changes nothing;
* ``hang``: repairs the bug, then hangs with a ``setsid`` child holding its output (killed at
  ``task_timeout``, its edit validated).

After each loop the project's tests are run again, independently (pytest with a JUnit report of
its own), and compared with what the loop says: its outcome (completed exactly when every test
passes) and its last validation's counts. Prints one line per scenario and exits 1 when any
disagrees, 3 when the package cannot be downloaded (the registry is not reachable)::

    python examples/real_project.py [--work DIR] [--scenario NAME ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "inflection"
VERSION = "0.5.1"
SHA256 = "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417"
BUG = ("    return word.replace('_', '-')", "    return word.replace('_', ' ')")
"""``dasherize`` turns underscores into spaces instead of dashes: 2 of 455 tests fail."""
TASK_TIMEOUT = 5
BOUND = 120.0
"""Seconds a scenario may take at most (the hanging agent's limit is TASK_TIMEOUT)."""

FIXER = """\
import sys
from pathlib import Path
if "dasherize" in sys.argv[1]:
    module = Path("inflection/__init__.py")
    module.write_text(module.read_text().replace({bug!r}, {good!r}))
print("fixed dasherize")
"""
IDLE = """\
print("I looked at it: it is fixed now")
"""
HANG = (
    FIXER
    + """\
import subprocess, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True)
print("thinking some more", flush=True)
time.sleep(3600)
"""
)
RUN_TESTS = """\
#!/bin/bash
python -m pytest -q -p no:cacheprovider -k "not dasherize" test_inflection.py; a=$?
python -m pytest -q -p no:cacheprovider -k dasherize test_inflection.py; b=$?
exit $((a | b))
"""
SCENARIOS = {
    "fixer": (FIXER, "./run_tests.sh"),
    "idle": (IDLE, "python -m pytest -q -p no:cacheprovider"),
    "hang": (HANG, "python -m pytest -q -p no:cacheprovider"),
}


class Unavailable(RuntimeError):
    """The package could not be downloaded."""


@dataclass(frozen=True)
class Seen:
    """What the loop said and what an independent run of the tests found."""

    scenario: str
    outcome: str
    exit_code: int
    line: str
    loop_counts: dict[str, int] | None
    passed: int
    failed: int
    seconds: float

    @property
    def agrees(self) -> bool:
        """The loop's word matches the project's tests."""
        completed = self.outcome == "completed"
        counts = self.loop_counts or {}
        same = (counts.get("passed"), counts.get("failed")) == (self.passed, self.failed)
        return completed == (self.failed == 0 and self.passed > 0) and same

    def __str__(self) -> str:
        counts = self.loop_counts or {}
        return (
            f"{self.scenario:<6} loop: {self.outcome} (exit {self.exit_code}, "
            f"{counts.get('passed')} passed, {counts.get('failed')} failed, "
            f"{self.seconds:.0f}s) | pytest alone: {self.passed} passed, {self.failed} failed | "
            f"{'agree' if self.agrees else 'DISAGREE'}\n    {self.line}"
        )


def download(folder: Path) -> Path:
    """The pinned sdist in ``folder`` (downloaded once, checked against its hash)."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"{PACKAGE}-{VERSION}.tar.gz"
    if not archive.is_file():
        pip = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
        done = subprocess.run(
            [*pip, "--disable-pip-version-check", "-d", str(folder), f"{PACKAGE}=={VERSION}"],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 or not archive.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise Unavailable(f"cannot download {PACKAGE}=={VERSION} from PyPI: {last}")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SHA256:
        raise Unavailable(f"{archive.name} has sha256 {digest}, not the pinned {SHA256}")
    return archive


def prepare(archive: Path, root: Path, scenario: str) -> Path:
    """A fresh copy of the project with the bug planted, under git, with the agent and fsm.toml."""
    with tempfile.TemporaryDirectory() as unpacked:
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
        workspace = root / scenario
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.copytree(Path(unpacked) / f"{PACKAGE}-{VERSION}", workspace)
    module = workspace / "inflection" / "__init__.py"
    text = module.read_text()
    assert BUG[0] in text, "the pinned package changed: the planted bug has nowhere to go"
    module.write_text(text.replace(*BUG))
    agent_code, test_command = SCENARIOS[scenario]
    agent = root / f"{scenario}_agent.py"
    agent.write_text(agent_code.format(bug=BUG[1], good=BUG[0]))
    runner = workspace / "run_tests.sh"
    runner.write_text(RUN_TESTS)
    runner.chmod(0o755)
    (workspace / "tasks.jsonl").write_text(
        json.dumps(
            {
                "task_id": "compile",
                "description": "Byte-compile the package",
                "tool": "bash",
                "command": "python -m py_compile inflection/__init__.py",
            }
        )
        + "\n"
    )
    (workspace / "fsm.toml").write_text(
        "[machine.ccw-loop]\n"
        f"test_command = {json.dumps(test_command)}\n"
        'task_list = "tasks.jsonl"\n'
        f"task_timeout = {TASK_TIMEOUT}\n\n"
        "[agent.codex]\n"
        f"command = {json.dumps([sys.executable, str(agent), '{prompt}'])}\n"
    )
    (workspace / ".gitignore").write_text("__pycache__/\n.workflow/\n*.egg-info/\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "planted"]):
        git = ["git", "-c", "user.name=fsm", "-c", "user.email=fsm@example.com", *args]
        subprocess.run(git, cwd=workspace, check=True, capture_output=True)
    return workspace


def fsm(workspace: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``fsm`` in ``workspace`` as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "fsm", "-C", str(workspace), *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND * 2,
    )


def pytest_alone(workspace: Path) -> tuple[int, int]:
    """Passed and failed tests of an independent run of the project's tests."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "junit.xml"
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        subprocess.run(
            [*pytest, f"--junitxml={report}"],
            check=False,
            cwd=workspace,
            capture_output=True,
            timeout=BOUND,
        )
        cases = list(ET.parse(report).getroot().iter("testcase"))
    failed = sum(any(c.tag in ("failure", "error") for c in case) for case in cases)
    skipped = sum(any(c.tag == "skipped" for c in case) for case in cases)
    return len(cases) - failed - skipped, failed


def run_scenario(archive: Path, root: Path, scenario: str) -> Seen:
    """One loop on a fresh copy, and the independent run after it."""
    workspace = prepare(archive, root, scenario)
    created = fsm(workspace, "new", "ccw-loop", "--set", f"title=real project: {scenario}")
    loop_id = created.stdout.strip()
    began = time.monotonic()
    run = fsm(workspace, "run", "-q", "ccw-loop", loop_id)
    seconds = time.monotonic() - began
    status = json.loads(fsm(workspace, "status", "--json", "ccw-loop", loop_id).stdout)
    document = json.loads((workspace / ".workflow" / ".loop" / f"{loop_id}.json").read_text())
    counts = ((document.get("skill_state") or {}).get("validate") or {}).get("counts")
    passed, failed = pytest_alone(workspace)
    outcome = "completed" if status.get("outcome") == "success" else str(status.get("status"))
    line = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr.strip()
    return Seen(scenario, outcome, run.returncode, line, counts, passed, failed, seconds)


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios; 0 when the loop told the truth in every one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="folder for the download and the copies")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args(argv)
    root = args.work or Path(tempfile.mkdtemp(prefix="fsm-real-project-"))
    try:
        archive = download(root / "download")
    except Unavailable as exc:
        print(f"real-project check skipped: {exc}")
        return 3
    results = [run_scenario(archive, root, name) for name in args.scenario or SCENARIOS]
    for seen in results:
        print(seen)
    return 0 if all(seen.agrees for seen in results) else 1


if __name__ == "__main__":
    sys.exit(main())
