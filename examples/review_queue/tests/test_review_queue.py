"""The review queue on the real engine, its reviewer and check command scripted."""

from __future__ import annotations

from pathlib import Path

import pytest
from review_queue.functions import review_next
from review_queue.model import ReviewOptions, ReviewQueue

from fsm import DocumentInputError, MissingRequirementError
from fsm.testing import Call, Harness, Reply, ScriptedExecutor, applied

MACHINE = Path(__file__).parents[1] / "review_queue" / "machine.yaml"


@pytest.fixture
def harness(tmp_path: Path) -> Harness[ReviewQueue]:
    """The machine in a workspace holding two files; nothing is run for real."""
    (tmp_path / "app.py").write_text("print('hello')\n")
    (tmp_path / "util.py").write_text("def half(x):\n    return x / 2\n")
    return Harness(MACHINE, tmp_path, document=ReviewQueue, executor=ScriptedExecutor())


def test_approved_files_complete_the_queue(harness: Harness[ReviewQueue]) -> None:
    """Each file is reviewed in its own step; all approved is a success."""
    harness.executor.on_agent("claude", Reply(stdout="Looks fine.\nAPPROVE\n"))
    queue = harness.create({"files": ["app.py", "util.py"], "title": "release"})
    result = queue.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    queue.assert_path(["queued", "reviewing", "reviewing", "done"])
    queue.assert_events(["review", "review", "finish"])
    queue.assert_outcome("completed", "2 of 2 files approved")
    assert [item.status for item in queue.doc.items] == ["approved", "approved"]
    prompts = harness.executor.prompts("claude")
    assert [p.split()[3] for p in prompts] == ["app.py", "util.py"]
    queue.assert_consistent()


def test_requested_changes_fail_the_queue_naming_the_file(harness: Harness[ReviewQueue]) -> None:
    """A file the reviewer sends back makes the queue end failed, saying which and why."""
    harness.executor.on_agent("claude", Reply(stdout="APPROVE"))
    harness.executor.on_agent("claude", Reply(stdout="CHANGES: guard x"), match=r"util\.py")
    queue = harness.create({"files": ["app.py", "util.py"]})
    assert queue.run().outcome == "failed"
    queue.assert_outcome("failed", "1 of 2 files approved; util.py: changes (guard x)")


def test_the_reviewer_reads_each_file_in_the_workspace(harness: Harness[ReviewQueue]) -> None:
    """The prompt names one file, and the reviewer runs where that file is."""

    def reads_the_file(call: Call) -> Reply:
        text = (call.cwd / call.text.split()[3]).read_text()
        return Reply(stdout="CHANGES: x may be a string" if "x / 2" in text else "APPROVE")

    harness.executor.on_agent("claude", reads_the_file)
    queue = harness.create({"files": ["app.py", "util.py"]})
    queue.run()
    queue.assert_outcome("failed", "1 of 2 files approved; util.py: changes (x may be a string)")


def test_a_failing_check_sends_the_file_back_without_a_review(tmp_path: Path) -> None:
    """With check_command set, a file that fails it is not shown to the reviewer."""
    executor = ScriptedExecutor(programs={"lint"})
    options = {"check_command": "lint {path}"}
    harness = Harness(MACHINE, tmp_path, document=ReviewQueue, options=options, executor=executor)
    harness.executor.on_shell(Reply(exit_code=1, stdout="bad.py:1: syntax error"), match="^lint ")
    harness.executor.on_agent("claude", Reply(stdout="APPROVE"))
    (tmp_path / "bad.py").write_text("def (\n")
    queue = harness.create({"files": ["bad.py"]})
    queue.run()
    queue.assert_outcome(
        "failed",
        "0 of 1 files approved; bad.py: changes (exited 1: lint bad.py (bad.py:1: syntax error))",
    )
    assert harness.executor.prompts("claude") == []


def test_an_answer_without_a_verdict_is_a_failed_review(harness: Harness[ReviewQueue]) -> None:
    """A reviewer that exits 0 without APPROVE or CHANGES has not reviewed the file."""

    harness.executor.on_agent("claude", Reply(stdout="Here is a poem instead."))
    queue = harness.create({"files": ["app.py"]})
    queue.run()
    assert queue.doc.items[0].note == "no verdict in the answer: Here is a poem instead."
    queue.assert_outcome("failed")


def test_a_missing_reviewer_refuses_the_run(harness: Harness[ReviewQueue]) -> None:
    """Without the reviewer agent the run refuses, saying how to add it; nothing changes."""
    queue = harness.create({"files": ["app.py"]})
    with pytest.raises(MissingRequirementError, match=r"agent 'claude' \(option reviewer\)"):
        queue.run()
    assert queue.status == "created"
    queue.assert_path(["queued"])


def test_stop_ends_the_queue_failed(harness: Harness[ReviewQueue]) -> None:
    """A stop after the first review ends in stopped, a failure naming how far it got."""
    harness.executor.on_agent("claude", Reply(stdout="APPROVE"))
    queue = harness.create({"files": ["app.py", "util.py"]})
    queue.run_until("reviewing")
    queue.control("stop")
    queue.assert_path(["queued", "reviewing", "stopped"])
    queue.assert_outcome("failed", "stopped by the user; 1 of 2 files approved")


def test_a_file_that_does_not_exist_is_refused_at_creation(
    harness: Harness[ReviewQueue],
) -> None:
    """fsm new with a file missing from the workspace is an input error naming it."""
    with pytest.raises(DocumentInputError, match=r"no such file in the workspace: gone\.py"):
        harness.create({"files": ["app.py", "gone.py"]})


def test_review_next_reviews_only_the_first_pending_file(harness: Harness[ReviewQueue]) -> None:
    """The action, called directly with the instance's typed context, updates one item."""
    harness.executor.on_agent("claude", Reply(stdout="CHANGES: docstring"))
    queue = harness.create({"files": ["app.py", "util.py"]})
    ctx = queue.context(ReviewOptions)
    after = applied(queue.doc, review_next(queue.doc, ctx))
    assert [(i.status, i.note) for i in after.items] == [("changes", "docstring"), ("pending", "")]
