"""Dependencies between issues: what may run next, and what can never run.

An issue's ``depends_on`` names issues that must be completed before it runs. Planning needs
nothing from them (all selected issues are planned first); execution takes the first unfinished
queue item whose dependencies are all completed, so the queue runs in dependency order whatever
the order of the issues file. An issue is *blocked*, never run, and the reason names the
dependency, when:

* a dependency in this instance failed, is blocked or unplanned (decided when its item comes
  up, or already when it is planned);
* a dependency is not among the issues this instance listed and is not completed in the issues
  file or ``issue-history.jsonl`` (unknown, or left failed by another run), decided when it is
  planned;
* it lies on a cycle of dependencies (``ISS-1 -> ISS-2 -> ISS-1``), decided when it is planned:
  a cycle is reported, never waited on.

A dependency outside the instance that is completed in the files counts as done.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .ids import shown
from .model import UNDONE_STATUSES, IssueManagerState, IssueState, QueueItem

__all__ = ["blocked_dependents", "dependency_cycle", "next_work", "planning_blocker"]

_VERB = {"failed": "failed", "blocked": "is blocked", "unplanned": "is unplanned"}


def dependency_cycle(issue_id: str, issues: Mapping[str, IssueState]) -> list[str] | None:
    """A cycle of dependencies through ``issue_id`` (``[a, b, a]``), or None."""
    path = [issue_id]
    seen = {issue_id}

    def walk(current: str) -> list[str] | None:
        issue = issues.get(current)
        for dep in issue.depends_on if issue is not None else ():
            if dep == issue_id:
                return [*path, dep]
            if dep in seen or dep not in issues:
                continue
            seen.add(dep)
            path.append(dep)
            found = walk(dep)
            if found is not None:
                return found
            path.pop()
        return None

    return walk(issue_id)


def planning_blocker(
    issue: IssueState, issues: Mapping[str, IssueState], outside: Mapping[str, str]
) -> str | None:
    """Why ``issue`` can never run, as far as is known before execution (None: plan it).

    ``outside`` maps the ids of the issues file (and its history) to their statuses there.
    """
    cycle = dependency_cycle(issue.id, issues)
    if cycle is not None:
        return "dependency cycle " + " -> ".join(shown(i) for i in cycle)
    for dep in issue.depends_on:
        known = issues.get(dep)
        if known is not None:
            if known.status in UNDONE_STATUSES:
                return _depends(dep, _VERB[known.status])
            continue
        status = outside.get(dep)
        if status is None:
            return _depends(dep, "is in no issues file this instance read")
        if status != "completed":
            return _depends(dep, f"is {shown(status)} in the issues file, not completed")
    return None


def next_work(doc: IssueManagerState) -> tuple[QueueItem, str | None] | None:
    """The next queue item to settle, and why it is blocked (None: run it); None when no item
    is unfinished.

    An item left ``executing`` by an interrupted run comes first (its dependencies were done
    when it started). Then, in queue order, the first item that is blocked or whose
    dependencies are all completed. An item waiting only on issues that have nothing left to
    run (no unfinished item) is blocked rather than waited on forever.
    """
    unfinished = [q for q in doc.queue if q.status in ("pending", "executing")]
    if not unfinished:
        return None
    for item in unfinished:
        if item.status == "executing":
            return item, None
    waiting: list[tuple[QueueItem, str]] = []
    for item in unfinished:
        blocker, pending = _execution_blocker(doc.issues[item.issue_id], doc.issues)
        if blocker is not None:
            return item, blocker
        if pending is None:
            return item, None
        waiting.append((item, pending))
    queued = {q.issue_id for q in unfinished}
    for item, pending in waiting:
        if pending not in queued:
            status = doc.issues[pending].status
            return item, _depends(pending, f"is {status} with nothing queued to run it")
    item, pending = waiting[0]
    return item, _depends(pending, "cannot run before it (a cycle in the queue)")


def _execution_blocker(
    issue: IssueState, issues: Mapping[str, IssueState]
) -> tuple[str | None, str | None]:
    """(why ``issue`` is blocked, the first dependency it still waits on); dependencies outside
    the instance were checked when it was planned."""
    pending: str | None = None
    for dep in issue.depends_on:
        known = issues.get(dep)
        if known is None or known.status == "completed":
            continue
        if known.status in UNDONE_STATUSES:
            return _depends(dep, _VERB[known.status]), None
        pending = pending or dep
    return None, pending


def blocked_dependents(chosen: Iterable[str], issues: Mapping[str, IssueState]) -> list[str]:
    """The blocked issues that depend, directly or through other blocked issues, on ``chosen``
    (in document order): retrying an issue retries what it blocked."""
    reached = set(chosen)
    changed = True
    while changed:
        changed = False
        for issue in issues.values():
            if issue.id in reached or issue.status != "blocked":
                continue
            if any(dep in reached for dep in issue.depends_on):
                reached.add(issue.id)
                changed = True
    initial = set(chosen)
    return [i for i in issues if i in reached and i not in initial]


def _depends(dep: str, what: str) -> str:
    return f"depends on {shown(dep)}, which {what}"
