"""issue-manager: list issues, plan each, queue the solutions, execute them one by one, report.

CCW's ``codex-issue-plan-execute`` skill made an explicit machine: ``machine.yaml``
holds the states and transitions, :mod:`.functions` the guards and actions, :mod:`.hooks` the
hooks, :mod:`.model` the state document, and the other modules the domain (issues file,
solutions, planning, execution, side files, report, preflight, ids, redaction).

Decisions where the original skill behaves otherwise (what a user sees must be true):

* **Success means every issue is done.** The original skill ends every instance ``completed``, even
  with zero issues done. Here the run ends in the final state ``complete`` (exit 0) only when every
  issue it listed is completed, else in the final state ``failed`` (exit 4). The ``outcome`` hook
  gives the one-line reason, for success too: ``"4 of 4 issues done"``, or ``"2 of 4 issues done;
  ISS-3 failed: <cause>; ISS-4 planning failed: <cause>"`` (at most three problems named, each cut
  at 200 characters, then ``"and N more (see final-report.md)"``).
* **The backlog is what the instance listed.** Issues added to the file after its last list pass
  (``context.max_rounds`` reached) are not part of it; they stay registered for the next
  instance, and the reason says so: ``"3 of 3 issues done (round limit 10 reached: issues added to
  the file after the last listing were not read)"``.
* **The document says the same.** The original skill's status enum (``pending|running|completed``)
  gains ``failed`` and the phase enum the state ``failed``; ``failure_reason`` holds the reason;
  ``summary.json`` has ``status`` and ``reason``; the report starts with an Outcome line. A
  dashboard reading any of them never sees success for work that was not done.
* **A failed issue is a recorded error.** The original skill returns an issue whose planning failed
  to ``registered`` and logs nothing in ``errors``, so the report said "pending" and "Errors:
  None.". Here the issue becomes ``failed`` with its cause in ``error``, and ``errors`` gets one
  entry per failed issue (``action``, ``message`` with the cause, ``timestamp``, ``issue_id``):
  unsafe id (``action-list``), planning (``action-plan``), execution (``action-execute``). The
  issues file keeps a planning failure ``registered`` (it still awaits a plan; a later instance
  tries again once the cause is fixed); an execution failure is written back as ``failed``, as
  before.
* **Nothing to do is a success that says so.** An issues file that exists but lists no open issue
  (registered or planned) ends ``complete`` with ``"nothing to do: the issues file lists no open
  issue (registered or planned)"``: the goal, every listed issue done, holds, and the reason does
  not pretend any work was done.
* **No issues file is never a completion.** Where the original skill stops quietly with 0 issues, a
  run refuses to start (exit 2) with ``no issues file at <path>: create it (...) or name yours with
  the issues_file option``; a file removed during a run fails the list step with the same message
  (recorded in ``errors``; after ``context.max_errors`` failures in a row the instance pauses).
* **Preflight.** Before a run starts or continues, the ``preflight`` hook (:mod:`.preflight`)
  names each missing requirement of the work ahead, one line each with how to provide it: the
  issues file; the planning agent (``plan_tool``) when an issue to plan has no solution file; the
  execution agent (``execute_tool``) when a known solution has a task without a command; bash
  when one has a command. Agents that will not be needed are not required. A malformed issues
  file is not a refusal: the list step reports it with file and line, as before.
* **Ids from input files are checked before they touch a path** (:mod:`.ids`): issue, solution
  and task ids must pass :func:`fsm.helpers.validate_id`. An unsafe issue id (``../../tmp/x``) makes
  that issue ``failed`` when listed; its files are never opened or written.
* **Secrets stay in fsm.toml** (:mod:`.redaction`): agent runs are recorded as the tool plus a
  redacted command (program, option names, ``{prompt}``; every other argument ``***``), and a
  hidden value the agent echoes is hidden in its output too. The expanded argv is never written.
* **Counts agree.** ``fsm status`` (the ``summary`` hook) counts issues and errors exactly as the
  report's Summary table does, and shows the same outcome and reason.
* **Dependencies order execution** (:mod:`.dependencies`). An issue line's ``depends_on`` and
  CCW's ``extended_context.notes.depends_on_issues`` (what its roadmap and spec-generator skills
  write into ``issues.jsonl``) are both read, joined, into ``depends_on`` of the issue. Planning
  needs nothing from them; execution takes the first queue item whose dependencies are all
  completed. An issue is ``blocked`` (a new issue status; its queue item too), never run, with
  the reason in ``error`` and an ``errors`` entry, when a dependency failed, is blocked or
  unplanned, is not listed here and not ``completed`` in the issues file or
  ``issue-history.jsonl`` (where ``ccw issue`` archives completed issues), or when it lies on a
  dependency cycle (reported as ``dependency cycle ISS-1 -> ISS-2 -> ISS-1``, never waited on).
  The issues file keeps a blocked issue's status: it still awaits its turn.
* **Failed work stays visible.** The list also picks up issues the file calls ``failed`` (an
  earlier run failed them): they are listed as failed, not run (``failed_before``), so a new
  instance over such a backlog ends ``failed`` naming them, never "nothing to do". Every failed
  reason ends with how to retry: ``to retry: fsm retry issue-manager <id> [ISSUE...]`` (the id
  is the work_dir's name).
* **Retry** (the ``retry`` hook, :func:`.hooks.reopen_issues`; ``fsm retry``). The issues named,
  or every one not completed, plus the blocked issues that depend on them, are selected for
  planning again, their errors, solutions and times cleared; the instance reopens in
  ``listing``, the loop limits start over, ``context.retries`` counts it. Planning reads the
  solution file again (so a corrected one is used); tasks the execution record shows completed
  for the same solution are not run again. The old queue items stay as they ended (the history
  of the first attempt); new ones are queued. Retry is a command, not an option of ``fsm run``:
  see the README's Decisions.
* **``plan_tool = "none"``** asks no planning agent (and the preflight requires none): issues
  with a solution file run, the others become ``unplanned`` (a new issue status), named in the
  reason and the report, not counted as errors, and left ``registered`` in the issues file. The
  run then ends ``failed``: not every issue is done. A retry plans them again once their solution
  files exist.
"""
