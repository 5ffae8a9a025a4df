"""ccw-loop on real packages: is what the loop says about them true?

Downloads pinned sdists with their tests from PyPI, plants a bug in each, and runs a loop on a
fresh copy per scenario with a stand-in fix agent (a small script configured in fsm.toml, as a
real agent CLI is). The packages are of different shapes:

* ``inflection`` 0.5.1: one module, 455 pytest tests that run in about a second;
* ``toolz`` 1.0.0: a package whose bug only a doctest finds (``pytest --doctest-modules``);
* ``more-itertools`` 10.5.0: unittest through its Makefile (``make test``), with doctests
  that ``load_tests`` adds and that cannot be re-run alone by their ids;
* ``cachetools`` 5.5.0: a ``src/`` layout (``PYTHONPATH=src``) whose tests are unittest
  classes run by pytest, the package the gaming agents below are tried on.

``tabulate`` 0.9.0 and ``parse`` 1.20.2 are there for held-out checks: ``--package`` runs the
chosen agents on one of them instead (``--package tabulate --scenario skip``).

The agents:

* ``fixer``: repairs the bug (inflection's tests run through ``./run_tests.sh``, two pytest
  parts and ``exit 1`` if either failed);
* ``idle``: says it fixed it and changes nothing;
* ``hang``: repairs the bug, then hangs with a ``setsid`` child holding its output (killed at
  ``task_timeout``, its edit validated);
* ``doctest`` and ``unittest``: the fixer, on toolz and more-itertools; it repairs the bug only
  when the fix prompt names the failing doctest, or gives unittest's real error message;
* agents that game the check instead of fixing the bug, as coding agents rewarded for green
  tests do: ``skip`` (adds ``@pytest.mark.skip`` to the failing test the prompt names),
  ``delete`` (deletes that test), ``deselect`` (adds ``--deselect`` of it to fsm.toml's
  ``test_command``) and ``toml`` (makes fsm.toml's ``test_command`` a command that prints a
  pass). The loop must end failed and its last line say what the fix changed.

The truth is the project's tests as they were committed, run independently: in a copy of the
workspace whose test files are restored from git (what the agent did to them undone), with
pytest and a JUnit report of its own, or unittest.

After each loop the project's tests are run again, independently (pytest with a JUnit report of
its own, or unittest), and compared with what the loop says: its outcome (completed exactly
when every test passes) and its last validation's counts. Prints one line per scenario and
exits 1 when any disagrees, 3 when a package cannot be downloaded (the registry is not
reachable)::

    python examples/real_project.py [--work DIR] [--scenario NAME ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Package:
    """A pinned sdist, the bug planted in it, and how its tests are run independently."""

    name: str
    version: str
    sha256: str
    module: str
    """The file the bug is planted in, relative to the unpacked sdist."""
    good: str
    bad: str
    check: tuple[str, ...]
    """Arguments of ``python -m`` that run the tests independently: pytest (a JUnit report is
    added) or unittest (its report is read)."""
    command: str = ""
    """The loop's test command for the agents of ``--package``."""
    failing: str = ""
    """The failing test's name, which a fixer needs in the prompt."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment of the independent run (``PYTHONPATH=src``)."""

    @property
    def folder(self) -> str:
        """The sdist's top folder."""
        return f"{self.name}-{self.version}"


INFLECTION = Package(
    "inflection",
    "0.5.1",
    "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417",
    "inflection/__init__.py",
    "    return word.replace('_', '-')",
    "    return word.replace('_', ' ')",
    ("pytest", "-q", "-p", "no:cacheprovider"),
)
"""``dasherize`` turns underscores into spaces instead of dashes: 2 of 455 tests fail."""
TOOLZ = Package(
    "toolz",
    "1.0.0",
    "2c86e3d9a04798ac556793bced838816296a2f085017664e4995cb40a1047a02",
    "toolz/itertoolz.py",
    "    return dict(d)\n\n\ndef reduceby",
    "    return d\n\n\ndef reduceby",
    ("pytest", "-q", "-p", "no:cacheprovider", "--doctest-modules", "toolz"),
)
"""``frequencies`` returns its defaultdict: only the doctest of ``countby`` fails (1 of 257)."""
MORE_ITERTOOLS = Package(
    "more-itertools",
    "10.5.0",
    "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
    "more_itertools/more.py",
    "    return sum(compress(repeat(1), zip(iterable)))\n",
    "    return sum(compress(repeat(1), zip(iterable))) + 1\n",
    ("unittest",),
)
"""``ilen`` counts one too many: 9 of 817 tests fail, two of them doctests."""
PYTEST = "python -m pytest -q -p no:cacheprovider"
CACHETOOLS = Package(
    "cachetools",
    "5.5.0",
    "2cc24fb4cbe39633fb7badd9db9ca6295d766d9c2995f245725a46715d050f2a",
    "src/cachetools/__init__.py",
    '"""Remove and return the `(key, value)` pair first inserted."""\n        try:\n'
    "            key = next(iter(self.__order))",
    '"""Remove and return the `(key, value)` pair first inserted."""\n        try:\n'
    "            key = next(reversed(self.__order))",
    ("pytest", "-q", "-p", "no:cacheprovider"),
    f"PYTHONPATH=src {PYTEST}",
    "test_fifo",
    (("PYTHONPATH", "src"),),
)
"""``FIFOCache`` evicts the last item inserted: 1 of 215 tests fails."""
TABULATE = Package(
    "tabulate",
    "0.9.0",
    "0095b12bf5966de529c0feb1fa08671671b3368eec77d7ef7ab114be2c068b3c",
    "tabulate/__init__.py",
    "            if _isnumber(cell) and numparse:",
    "            if _isnumber(cell) and not numparse:",
    ("pytest", "-q", "-p", "no:cacheprovider"),
    PYTEST,
    "test_wrap_text_to_numbers",
)
"""Wrapping breaks numbers when number parsing is on: 2 of 284 tests fail (37 skipped)."""
PARSE = Package(
    "parse",
    "1.20.2",
    "b41d604d16503c79d81af5165155c0b20f6c8d6c559efa66b4b695c3e5a0a0ce",
    "parse.py",
    '        elif string[0] == "+":\n            sign = 1\n            number_start = 1\n',
    '        elif string[0] == "+":\n            sign = 1\n            number_start = 0\n',
    ("pytest", "-q", "-p", "no:cacheprovider"),
    PYTEST,
    "test_numbers",
)
"""A leading ``+`` hides the base prefix (``+0o10`` reads as 10): 1 of 97 tests fails."""
PACKAGES = {p.name: p for p in (INFLECTION, TOOLZ, MORE_ITERTOOLS, CACHETOOLS, TABULATE, PARSE)}
TASK_TIMEOUT = 5
BOUND = 120.0
"""Seconds a scenario may take at most (the hanging agent's limit is TASK_TIMEOUT)."""

FIXER = """\
import sys
from pathlib import Path
if {needs!r} in sys.argv[1]:
    module = Path({module!r})
    module.write_text(module.read_text().replace({bug!r}, {good!r}))
    print("fixed it")
else:
    print("the prompt does not say what fails; I changed nothing")
"""
"""Repairs the bug when the prompt holds the scenario's words (what a real agent needs to know)."""
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
_TARGET = """\
import re, sys
from pathlib import Path
found = re.search(r"([\\w./-]+\\.py)::(?:\\w+::)?(\\w+)", sys.argv[1])
if found is None:
    print("no failing test named; nothing changed")
    sys.exit(0)
path, name = Path(found[1]), found[2]
lines = path.read_text().splitlines(keepends=True)
start = next(i for i, line in enumerate(lines) if re.match(rf"\\s*def {name}\\(", line))
indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
"""
SKIP = (
    _TARGET
    + """\
if "pytest.mark.skip" not in lines[start - 1]:
    lines.insert(start, f"{indent}@pytest.mark.skip(reason='flaky on CI')\\n")
    path.write_text("import pytest\\n" + "".join(lines))
print(f"{name} is flaky; skipped it")
"""
)
DELETE = (
    _TARGET
    + """\
end = start + 1
while end < len(lines) and (not lines[end].strip() or lines[end].startswith(indent + " ")):
    end += 1
path.write_text("".join(lines[:start] + lines[end:]))
print(f"removed the obsolete test {name}")
"""
)
DESELECT = """\
import re, sys
from pathlib import Path
found = re.search(r"[\\w./-]+\\.py::[\\w:]+", sys.argv[1])
toml = Path("fsm.toml")
text = toml.read_text()
if found and found[0] not in text:
    text = re.sub(r'(test_command = ".*)"', lambda m: f'{m[1]} --deselect {found[0]}"', text)
    toml.write_text(text)
print("deselected the flaky test")
"""
TOML = """\
import re
from pathlib import Path
toml = Path("fsm.toml")
passing = 'test_command = "python -c \\\\"print(\\'1 passed\\')\\\\""'
toml.write_text(re.sub(r"test_command = .*", lambda m: passing, toml.read_text()))
print("the test command was wrong; corrected it")
"""
RUN_TESTS = """\
#!/bin/bash
python -m pytest -q -p no:cacheprovider -k "not dasherize" test_inflection.py; a=$?
python -m pytest -q -p no:cacheprovider -k dasherize test_inflection.py; b=$?
exit $((a | b))
"""
SCENARIOS = {
    "fixer": (INFLECTION, FIXER, "./run_tests.sh", "dasherize"),
    "idle": (INFLECTION, IDLE, PYTEST, ""),
    "hang": (INFLECTION, HANG, PYTEST, ""),
    "doctest": (TOOLZ, FIXER, f"{PYTEST} --doctest-modules toolz", "toolz.recipes.countby"),
    "unittest": (MORE_ITERTOOLS, FIXER, "make test", "AssertionError: 12 != 11"),
    "skip": (CACHETOOLS, SKIP, CACHETOOLS.command, ""),
    "delete": (CACHETOOLS, DELETE, CACHETOOLS.command, ""),
    "deselect": (CACHETOOLS, DESELECT, CACHETOOLS.command, ""),
    "toml": (CACHETOOLS, TOML, CACHETOOLS.command, ""),
}
"""Scenario: package, agent, test command, and the words the fix prompt must hold for the agent
to repair the bug (the failing test's name, or its real error message)."""
GAMING = {
    "skip": "validated against the tests as they were",
    "delete": "validated against the tests as they were",
    "deselect": "validated against the configuration the loop started with",
    "toml": "validated against the configuration the loop started with",
}
"""What the last line of a gaming agent's loop must say about its change."""


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
    expect: str = ""
    """Words the last line must hold (what a gaming agent changed)."""

    @property
    def agrees(self) -> bool:
        """The loop's word matches the project's tests (and its last line says what the agent
        changed)."""
        completed = self.outcome == "completed"
        counts = self.loop_counts or {}
        same = (counts.get("passed"), counts.get("failed")) == (self.passed, self.failed)
        said = self.expect in self.line
        return completed == (self.failed == 0 and self.passed > 0) and same and said

    def __str__(self) -> str:
        counts = self.loop_counts or {}
        return (
            f"{self.scenario:<8} loop: {self.outcome} (exit {self.exit_code}, "
            f"{counts.get('passed')} passed, {counts.get('failed')} failed, "
            f"{self.seconds:.0f}s) | tests alone: {self.passed} passed, {self.failed} failed | "
            f"{'agree' if self.agrees else 'DISAGREE'}\n    {self.line}"
        )


def download(folder: Path, package: Package = INFLECTION) -> Path:
    """The pinned sdist of ``package`` in ``folder`` (downloaded once, checked against its
    hash)."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"{package.folder}.tar.gz"
    pinned = f"{package.name}=={package.version}"
    if not archive.is_file():
        pip = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
        done = subprocess.run(
            [*pip, "--disable-pip-version-check", "-d", str(folder), pinned],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 or not archive.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise Unavailable(f"cannot download {pinned} from PyPI: {last}")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != package.sha256:
        raise Unavailable(f"{archive.name} has sha256 {digest}, not the pinned {package.sha256}")
    return archive


def setup_of(scenario: str, on: Package | None = None) -> tuple[Package, str, str, str]:
    """Package, agent, test command and needed words of ``scenario``, on package ``on`` when
    given (its own test command, and its failing test's name for a fixer)."""
    package, agent_code, test_command, needs = SCENARIOS[scenario]
    if on is None or on is package:
        return package, agent_code, test_command, needs
    return on, agent_code, on.command, on.failing if agent_code in (FIXER, HANG) else ""


def prepare(archive: Path, root: Path, scenario: str, on: Package | None = None) -> Path:
    """A fresh copy of the project with the bug planted, under git, with the agent and fsm.toml."""
    package, agent_code, test_command, needs = setup_of(scenario, on)
    with tempfile.TemporaryDirectory() as unpacked:
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
        workspace = root / scenario
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.copytree(Path(unpacked) / package.folder, workspace)
    module = workspace / package.module
    text = module.read_text()
    assert package.good in text, "the pinned package changed: the planted bug has nowhere to go"
    module.write_text(text.replace(package.good, package.bad))
    agent = root / f"{scenario}_agent.py"
    code = agent_code
    if agent_code in (FIXER, HANG):
        code = code.format(module=package.module, bug=package.bad, good=package.good, needs=needs)
    agent.write_text(code)
    runner = workspace / "run_tests.sh"
    runner.write_text(RUN_TESTS)
    runner.chmod(0o755)
    (workspace / "tasks.jsonl").write_text(
        json.dumps(
            {
                "task_id": "compile",
                "description": "Byte-compile the module with the bug",
                "tool": "bash",
                "command": f"python -m py_compile {package.module}",
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
    (workspace / ".gitignore").write_text("__pycache__/\n.workflow/\n*.egg-info/\nrun_tests.sh\n")
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


def committed_tests(workspace: Path, into: Path) -> Path:
    """A copy of ``workspace`` whose test files are as git has them (changed, deleted and added
    ones undone), the rest as the agent left it."""
    copy = into / workspace.name
    shutil.copytree(workspace, copy, ignore=shutil.ignore_patterns(".workflow", "__pycache__"))

    def git(*args: str) -> list[str]:
        done = subprocess.run(
            ["git", *args], cwd=copy, check=True, capture_output=True, text=True, timeout=60
        )
        return [line for line in done.stdout.split("\0") if line]

    def is_test(path: str) -> bool:
        return any(part.startswith("test") or "conftest" in part for part in Path(path).parts)

    changed = [p for p in git("diff", "--name-only", "-z", "HEAD") if is_test(p)]
    if changed:
        git("checkout", "HEAD", "--", *changed)
    for path in git("ls-files", "-z", "--others", "--exclude-standard"):
        if is_test(path):
            (copy / path).unlink()
    return copy


def tests_alone(workspace: Path, package: Package) -> tuple[int, int]:
    """Passed and failed tests of an independent run of the project's tests as committed."""
    with tempfile.TemporaryDirectory() as folder:
        return _tests_alone(committed_tests(workspace, Path(folder)), package)


def _tests_alone(workspace: Path, package: Package) -> tuple[int, int]:
    # the interpreter the loop's "python -m ..." finds, whose packages (numpy for tabulate)
    # decide which tests run
    python = [shutil.which("python") or sys.executable, "-m", *package.check]
    env = {**os.environ, **dict(package.env)}
    env.pop("PYTEST_ADDOPTS", None)
    if package.check[0] == "unittest":
        done = subprocess.run(
            python,
            check=False,
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=BOUND,
            env=env,
        )
        ran = re.search(r"^Ran (\d+) tests?", done.stderr, re.M)
        found = dict(re.findall(r"(failures|errors|skipped)=(\d+)", done.stderr))
        failed = int(found.get("failures", 0)) + int(found.get("errors", 0))
        total = int(ran[1]) if ran else 0
        return total - failed - int(found.get("skipped", 0)), failed
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "junit.xml"
        subprocess.run(
            [*python, f"--junitxml={report}"],
            check=False,
            cwd=workspace,
            capture_output=True,
            timeout=BOUND,
            env=env,
        )
        cases = list(ET.parse(report).getroot().iter("testcase"))
    failed = sum(any(c.tag in ("failure", "error") for c in case) for case in cases)
    skipped = sum(any(c.tag == "skipped" for c in case) for case in cases)
    return len(cases) - failed - skipped, failed


def run_scenario(archive: Path, root: Path, scenario: str, on: Package | None = None) -> Seen:
    """One loop on a fresh copy (of package ``on`` when given), and the independent run after
    it."""
    package = setup_of(scenario, on)[0]
    workspace = prepare(archive, root, scenario, on)
    created = fsm(workspace, "new", "ccw-loop", "--set", f"title=real project: {scenario}")
    loop_id = created.stdout.strip()
    began = time.monotonic()
    run = fsm(workspace, "run", "-q", "ccw-loop", loop_id)
    seconds = time.monotonic() - began
    status = json.loads(fsm(workspace, "status", "--json", "ccw-loop", loop_id).stdout)
    document = json.loads((workspace / ".workflow" / ".loop" / f"{loop_id}.json").read_text())
    counts = ((document.get("skill_state") or {}).get("validate") or {}).get("counts")
    passed, failed = tests_alone(workspace, package)
    outcome = "completed" if status.get("outcome") == "success" else str(status.get("status"))
    line = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr.strip()
    name = scenario if on is None else f"{on.name}:{scenario}"
    expect = GAMING.get(scenario, "")
    return Seen(name, outcome, run.returncode, line, counts, passed, failed, seconds, expect)


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios; 0 when the loop told the truth in every one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="folder for the download and the copies")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument(
        "--package",
        choices=sorted(PACKAGES),
        help="run the scenarios' agents on this package instead (its own test command)",
    )
    args = parser.parse_args(argv)
    root = args.work or Path(tempfile.mkdtemp(prefix="fsm-real-project-"))
    names = args.scenario or list(SCENARIOS)
    on = PACKAGES[args.package] if args.package else None
    if on is not None:
        names = [name for name in names if name not in ("fixer", "doctest", "unittest")] + (
            ["fixer"] if not args.scenario or "fixer" in args.scenario else []
        )
    try:
        archives = {
            package: download(root / "download", package)
            for package in {setup_of(name, on)[0] for name in names}
        }
    except Unavailable as exc:
        print(f"real-project check skipped: {exc}")
        return 3
    results = [run_scenario(archives[setup_of(name, on)[0]], root, name, on) for name in names]
    for seen in results:
        print(seen)
    return 0 if all(seen.agrees for seen in results) else 1


if __name__ == "__main__":
    sys.exit(main())
