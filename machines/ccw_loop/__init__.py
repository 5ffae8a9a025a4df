"""ccw-loop: the CCW develop/debug/validate loop as an explicit machine.

``machine.yaml`` holds the states and the ordered phase rules; ``functions.py`` names the guards,
actions and hooks; ``model.py`` is the ``LoopState`` document the CCW dashboard shares.

Decisions. Where CCW's original loop behaves otherwise, what the user sees must be true, so these
win:

* **Success means the work was done.** A loop ends ``completed`` (exit 0) only when every task
  of its task list is done and a validation passed after the last change (``failed == 0 and
  passed > 0``). The ``outcome`` hook (:mod:`~fsm_machines.ccw_loop.verdict`) judges the document,
  so a status of ``completed`` written by someone else (the dashboard's ``PATCH /status``) over
  a failed task or an unvalidated change is reported as a failure naming what is missing. A
  success says what was achieved: ``all 2 tasks done, 1 fix attempt; validation passed: 10
  tests passed``.
* **A task that could not run is failed, and failed tasks are not retried.** A missing agent or
  program, a bash task without command, an exit code other than 0 or a timeout fail the task
  (reason in the task, ``skill_state.errors``, changes.log and develop.md). The other tasks
  still run (the dashboard's ``on_error: continue``); then, with nothing pending, the loop ends
  ``failed`` naming each failed task and why (event ``abort``), without a validation, because
  it cannot complete. ``on_error: fail_fast`` ends it at once. ``on_error: pause`` pauses the
  loop and puts the task back to pending, so that a person fixes the cause and resumes to
  retry it (each retry costs an iteration, so ``max_iterations`` still bounds it). Fix attempts
  are not tasks of the task list: a failed one leads to the next attempt (see below).
* **Task-list entries that cannot run are failed tasks, not skipped lines.** An entry without
  description, with an unknown tool, mode or ``on_error``, or with an id that
  :func:`fsm.helpers.validate_id` rejects (``../../x``, ``a/b``, a newline) becomes a failed task
  saying why; an unsafe id is replaced by ``invalid-task-<hash>`` and appears, escaped, only in
  that error, so it never reaches a file name or a progress-file heading. Only lines that are
  not JSON objects are skipped (and reported), as before. Files are named by the instance id
  the engine checked, never by the document's ``loop_id`` (data another program may write).
* **Preflight.** Before ``fsm run`` starts or drives a loop, the ``preflight`` hook lists, one
  line each with how to configure it: the agents of the pending tasks (in the document and
  still in the task-list file), ``fix_tool`` (always: any loop may need a fix; an uninitialised
  loop without task list needs it for its one task), a bash task without command, bash itself
  for bash tasks, and the program of ``test_command`` (its first word after ``NAME=value``
  assignments, ``~`` and ``$VARS`` expanded as bash would; not checked when the command starts
  with a shell word such as ``cd``). Anything listed makes the run refuse (exit 2) with the
  loop unchanged; a missing ``fix_tool`` names ``-o fix_tool=NAME`` and ``-o fix_tool=none`` as
  ways out. ``fsm step`` and ``fsm fire`` do not check: a missing agent there is a failed task,
  as above.
* **A loop may have no fix agent (``fix_tool = "none"``).** A newcomer without any
  agent CLI can then run a loop whose tasks are bash commands: the preflight asks for no agent
  for fixes, and a pending task that names no tool (it would run on ``fix_tool``) is a problem
  line of its own (``task T in tasks.jsonl names no tool and fix_tool is none: ...``; for a loop
  without task list, whose description is its one task: give it a task list or set fix_tool);
  stepped past the preflight such a task is a failed task. Validation passing completes the loop
  as always. When it fails, **debug still runs first**: re-running each failing test alone tells
  a flaky test (it passes alone: validate again, as with an agent) from a real failure, and
  writes the evidence (debug.md) the person who takes over needs. Any failing test debug did not
  find flaky (confirmed, or not judged) ends the loop ``failed`` at once (event ``hand_over``),
  without a fix task: ``validation failed: 2 tests fail (a, b); debug confirmed 2 by running
  them alone (see .workflow/.loop/<id>.progress/debug.md); no fix agent is configured (fix_tool
  none): fix them by hand or set fix_tool``, which the outcome hook returns. A debug round then
  reserves 2 iterations (itself and a validation), not 3, and the menu offers no fix. The
  default stays ``codex``, as in CCW's loop: the loop exists to get failing tests fixed, a loop
  without task list needs an agent for its description, and a missing codex costs nothing (the
  run is refused before it starts, naming ``fix_tool=none``), whereas a default of none would
  turn every failing test into a failed loop without saying an agent could have fixed it.
* **The iteration budget reserves what must follow.** A develop or fix starts only when an
  iteration is left for the validation after it, a debug round only when a fix and its
  validation fit too (:data:`fsm_machines.ccw_loop.rules.COST`); otherwise the loop ends ``failed``
  at once (``exhaust``) with a reason saying what did not fit. So a fix applied on the last
  possible iteration is always validated, and three fix attempts fit in the default 10
  iterations with up to two tasks. The same holds in the menu (develop and fix need two
  iterations left).
* **An agent task that changed no file is a failed task, a fix or a task of the task list.**
  Changes are read from git in a repository
  (dirty files, and the files of commits the agent made), otherwise, or when the repository
  ignores the workspace (the demo's output folder), from the size and modification time of
  every file of the workspace except fsm's state folders (``.workflow``, the loop's state
  folder), version-control folders, caches and virtual environments
  (:mod:`~fsm.process.changes`). When changes cannot be known (a
  workspace of more than 20,000 files outside git) the task counts as applied and the
  validation judges it (``changes_unknown`` on the task). Only agent tasks in ``write`` mode are
  held to it: an ``analysis`` task may not edit, and a bash task is a command (a compile check,
  a linter) that may rightly change nothing, so both are judged by their exit status only.
* **Work an agent did is validated, whatever became of the agent.** What a task changed is
  recorded even when it then failed or timed out, and a fix that changed files (or whose
  changes cannot be known) is followed by a validation, never by the next attempt. An agent
  attempt is recorded in ``{id}.progress/attempt.json`` while it runs
  (:mod:`~fsm_machines.ccw_loop.attempts`): after a run killed or crashed meanwhile, a task of
  the task list runs again with its changes compared to the workspace before the interrupted
  attempt, and an interrupted fix is validated first, then recorded as a failed fix task that
  changed what it changed (counted for its hypothesis). So the loop never "gives up ... changed
  no file" when the file was changed by the attempt that timed out or was killed.
* **The verdict of a test run follows from what happened** (:mod:`~fsm_machines.ccw_loop.testrun`).
  The command's exit status is part of it: non-zero is never a pass, whatever the counts say
  (``pytest --cov-fail-under=100`` with every test passing; ``./run_tests.sh`` whose doctest
  part failed), and failures in a report are never a pass after exit 0. The counts are the
  totals of every part of a compound command: every pytest or unittest summary line of the
  output is read, and when they add up to other totals than the JUnit report (which covers only
  the part that wrote it) the summary lines win; failures pytest names in its short summary
  (``FAILED path::test - message``) become failed rows, so a part without a report is counted
  and its failing tests debugged. ``skill_state.validate`` keeps ``exit_code``, ``counts``
  (with their ``source``) and a one-line ``verdict``. A failed validation that names no failing
  test (non-zero exit with every reported test passing, or failures counted but not named)
  ends the loop at once (``halt``), with the command's own last line, since neither debug nor a
  fix has a test to work on; a run that could not be judged at all stays a failed action,
  retried until ``max_errors``.
* **A fix is judged on the tests as they were** (:mod:`~fsm_machines.ccw_loop.baseline`). The
  first fix records the test files, the tests collected with their outcomes and the count in
  ``{id}.progress/baseline/``. A later validation whose test files differ runs in a copy of the
  workspace in the temporary folder with them restored, never by swapping files in the user's
  tree (a run killed at any moment leaves the agent's edits as they were); debug re-runs alone
  there too, so an assertion a fix weakened is not called flaky. A test that ran before and is
  now missing (deleted, deselected), skipped or xfailed, or a drop in the count, is a failing
  test of that validation (``lost_tests`` in ``skill_state.validate``). What a fix changed among
  the test files, fsm.toml and the task list is ``protected_files_changed`` on its task, in the
  fixes line of ``fsm status`` and in the last line. ``allow_test_changes`` (option, or on a
  task of the task list) runs the tests as changed, and still compares the outcomes.
* **The configuration is pinned** (:mod:`~fsm_machines.ccw_loop.pinning`): test command and
  timeout, fix agent, task timeout, hypotheses per round and ``allow_test_changes`` in
  ``skill_state.config``, the limits in ``max_errors``/``max_fix_attempts``. A run whose options
  differ is refused by the preflight, naming each change, until ``fsm run --reconfigure``.
* **The user's test command is never rewritten**: pytest's report is asked for through
  ``PYTEST_ADDOPTS``; other runners write ``{junit}``, or their summary lines are read.
* **Flaky is said, never hidden; one re-run proves only what it shows.** A failing test re-run
  alone (with the test command's own pytest, or ``python -m pytest`` for a script reporting
  pytest node ids; with ``python -m unittest ID`` for a unittest suite, whose report names the
  failing tests ``FAIL: test_y (pkg.test_x.T.test_y)``) that passes is a flaky test (hypothesis
  ``rejected``): the loop's last line,
  ``fsm status`` (debug line) and summary.md name it, whether the loop completes or ends failed
  (at the iteration limit too). One that
  fails again is ``confirmed`` with the words "failed in the full run and again when run alone
  once", never "deterministically"; a re-run is judged by what pytest reported, not its exit
  status alone (a ``python`` without pytest also exits 1).
* **One hypothesis per failing test, fix attempts counted, a bounded number of them.** Debug
  ties each hypothesis to its test (``test`` and ``suite`` keys) and reuses its id in later
  rounds; it investigates only failing tests without a confirmed hypothesis. A test that is
  understood (confirmed) gets its next fix attempt instead of another debug round: tasks
  ``fix-H1``, ``fix-H1-2``, ``fix-H1-3`` (key ``attempt``; ``fix_attempts`` on the hypothesis),
  whose prompts carry the latest failure and what the earlier attempts did. A failed attempt
  (it did not run, or changed nothing) is followed by the next one at once; an applied one by a
  validation. After ``max_fix_attempts`` (option, default 3, persisted at init in
  ``skill_state.max_fix_attempts``) the loop ends ``failed`` (``abandon``): ``Gave up on <test>
  after 3 fix attempts (H1); it still fails: <error>``. ``confirmed_hypothesis`` names the
  hypothesis the next (or current) fix is for. CCW's skills' debug.log instrumentation and
  ``WAITING_INPUT`` are not reproduced.
* **Order of the endings.** ``complete``, then ``abort`` (failed task), ``abandon`` (fix
  attempts spent), ``hand_over`` (tests fail, no fix agent), ``halt`` (a failed validation
  names no test), ``give_up`` (``max_errors``
  failures in a row), ``exhaust`` (iterations): the most specific reason wins when several hold
  (three failed fix attempts are also three failures in a row).
* **Tasks added after init are developed.** The loop's task list is both of its files (the
  documented ``{id}.tasks.jsonl`` first, then the dashboard's ``{id}/tasks.jsonl``), else the
  ``task_list`` option. Before every decision the rules look for ids the document does not hold
  yet; develop loads them (at the end of the list) before taking the next task, and a loop
  never completes while such a task waits. Edits to tasks already loaded are not applied.
* **``validate.coverage`` is null until a run measured it** (the Claude skill's ``|| null``;
  the Codex skill's initial 0 would claim an unmeasured suite covers nothing).
* **Secrets in agent commands are never recorded.** The loop records an agent task by its tool,
  the command as the executor shows it (``fsm.process.redaction``: program, option names,
  ``{prompt}``, every other argument ``***``) and an outcome line built from that; the executor also
  scrubs hidden values from the output the loop keeps. Nothing of a token configured in fsm.toml
  reaches the document, changes.log, debug.log, the progress files or the instance log.
* **``fsm status`` agrees with the document.** Tasks of the task list and fix attempts are
  counted apart (``develop: 1/2 tasks done (50%), 1 failed``; ``fixes: 3 attempts (1 changed
  2 files, 2 failed)``: the attempts whose ``files_changed`` names a file, a failed or
  timed-out one included, and the files they changed, each once; ``none changed a file``),
  the validation line
  shows the last run's counts over every part (``FAILED (8 of 467 failed)``, ``FAILED (exit 1
  although no test failed: 12 passed)``), and a validation older than the latest change says
  so.
"""
