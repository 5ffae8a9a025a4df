"""issue-manager: list issues, plan each, queue the solutions, execute them one by one, report.

The machine of seed 003 (the ``codex-issue-plan-execute`` skill) made explicit: ``machine.yaml``
holds the states and transitions, :mod:`.functions` the guards and actions, :mod:`.hooks` the
hooks, :mod:`.model` the state document, and the other modules the domain (issues file,
solutions, planning, execution, side files, report, preflight, ids, redaction).

Decisions where the seed or the SPEC says otherwise (issues 9 and 10 are newer, and what a user
sees must be true):

* **Success means every issue is done.** The seed ends every instance ``completed``, even with
  zero issues done. Here the run ends in the final state ``complete`` (exit 0) only when every
  issue it listed is completed, else in the final state ``failed`` (exit 4). The ``outcome`` hook
  gives the one-line reason, for success too: ``"4 of 4 issues done"``, or ``"2 of 4 issues done;
  ISS-3 failed: <cause>; ISS-4 planning failed: <cause>"`` (at most three problems named, each
  cut at 200 characters, then ``"and N more (see final-report.md)"``).
* **The backlog is what the instance listed.** Issues added to the file after its last list pass
  (``context.max_rounds`` reached) are not part of it; they stay registered for the next
  instance, and the reason says so: ``"3 of 3 issues done (round limit 10 reached: issues added to
  the file after the last listing were not read)"``.
* **The document says the same.** The seed's status enum (``pending|running|completed``) gains
  ``failed`` and the phase enum the state ``failed``; ``failure_reason`` holds the reason;
  ``summary.json`` has ``status`` and ``reason``; the report starts with an Outcome line. A
  dashboard reading any of them never sees success for work that was not done.
* **A failed issue is a recorded error.** The seed returns an issue whose planning failed to
  ``registered`` and logs nothing in ``errors``, so the report said "pending" and "Errors: None.".
  Here the issue becomes ``failed`` with its cause in ``error``, and ``errors`` gets one entry per
  failed issue (``action``, ``message`` with the cause, ``timestamp``, ``issue_id``): unsafe id
  (``action-list``), planning (``action-plan``), execution (``action-execute``). The issues file
  keeps a planning failure ``registered`` (it still awaits a plan; a later instance tries again
  once the cause is fixed); an execution failure is written back as ``failed``, as before.
* **Nothing to do is a success that says so.** An issues file that exists but lists no open issue
  (registered or planned) ends ``complete`` with ``"nothing to do: the issues file lists no open
  issue (registered or planned)"``: the goal, every listed issue done, holds, and the reason does
  not pretend any work was done.
* **No issues file is never a completion.** Where the seed stops quietly with 0 issues, a run
  refuses to start (exit 2) with ``no issues file at <path>: create it (...) or name yours with the
  issues_file option``; a file removed during a run fails the list step with the same message
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
"""
