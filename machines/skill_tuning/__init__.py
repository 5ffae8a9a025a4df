"""The skill-tuning machine: diagnose an agent skill, fix it with backups, verify, report.

Decisions (issue 9: outcomes that tell the truth; where the SPEC or seed 004 says otherwise, the
issue wins):

* **Only a passed gate is a success.** SPEC 4.3 completes a run when the iteration limit is
  reached; the issue requires exit 0 only when the quality gate passed. So ``finish`` (limit
  reached) leads to ``completed`` only with ``gate_passed``; ``exhaust`` (limit reached, gate
  not passed) and ``give_up`` (gate not passed, no fix left to apply) lead to ``failed``
  (exit 4). The ``outcome`` hook (:func:`.verdict.verdict`) says success only for a completed
  run with gate ``pass``, with a reason that is specific for success too.
* **The document says so itself.** A failing end sets ``status: failed`` and
  ``failure_reason`` (the field of the same name in ccw-loop's ``LoopState``; seed 004 has
  none) to the one-line reason, e.g. ``quality gate review: 70/100, 2 high; 2 issues left
  unfixed after 1 iteration (2 need judgement: ...)``; a failed gate is also appended to the
  seed's ``errors`` (``action-complete``, not recoverable). The report's Outcome line, ``fsm
  run``'s last line and ``fsm status`` show the same text.
* **A fix is verified when it is applied**, not in the next round: right after writing it,
  the whole skill is diagnosed again with every rule of every area (``focus_areas`` narrows
  the report, never the verification) and compared with the skill just before the fix. It is
  kept only if the issues it addressed are gone, it adds no finding at all (counted per rule,
  file and severity, so moved lines are not new ones), and the consistency checks of
  :mod:`.fixes.consistency` pass: names read by changed lines exist where they are read from
  (variables the skill defines or already uses, placeholders in prose, keys of the skill's
  JSON data files), links and ``Read('specs/...')`` paths resolve, data files still parse,
  fences are closed. Otherwise its backup is restored byte for byte and the record says
  ``rolled_back`` with ``failure_reason`` naming each failed check. Verifying at once makes
  each verdict exact even when a batch holds several fixes; the next round's diagnosis then
  scores the skill (the ``verify`` action keeps the seed's name for scoring and gating).
* **Fixes introduce no names.** The mechanical fixes only reuse names of the line they fix;
  the checkpoint section names a run folder (``{workDir}``) only when the skill defines that
  variable. A name counts as the skill's when it is defined (``const``, parameters, loop
  variables...), a language global or agent tool, or already used by the skill before the fix
  (its environment, such as the ``state`` an orchestrator passes in).
* **Deliberate mappings are left alone.** ``fix_example: rule.fixExample`` maps the rule files'
  camelCase onto the skill's own snake_case: a field spelled both ways on such a line is not an
  inconsistency, and a rename never moves away from a key of the skill's JSON data.
* **Pictures and examples are not code** (:mod:`.markdown`): lines with box-drawing characters,
  ASCII-framed blocks, untagged blocks that are mostly diagram, ``text``/``mermaid``/
  ``markdown`` blocks, blocks under example headings or after "For example:", and anything in
  blockquotes or inline code produce no finding.
* **One call, one finding.** An agent call is identified by its call statement (from the line
  that starts it to where its brackets balance): a line inside it that looks like a call (a
  ``ccw cli`` in the prompt) is part of it, and the same statement repeated in the same file is
  the same call, reported once at its first line.
* **Counts agree.** The report's Issues and Fixes lines are made by the functions that make the
  ``issues`` and ``fixes`` lines of ``fsm status`` (:mod:`.verdict`).
* **Restoring uses what every machine has**: ``mv SKILL SKILL.tuned && cp -a BACKUP SKILL``, run
  from the workspace; the tuned skill is kept, not deleted.
* **Preflight** checks the one outside requirement: the ``fix_tool`` agent, when set, must be
  configured or on PATH. The target skill folder is not a preflight requirement: ``fsm new``
  already refuses a missing one, and one that disappears later is an action failure counted
  towards ``max_errors``, as the seed describes.
"""
