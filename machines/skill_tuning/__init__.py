"""The skill-tuning machine: diagnose an agent skill, fix it with backups, verify, report.

Decisions (outcomes that tell the truth; where CCW's original skill-tuning skill behaves
otherwise, these win):

* **Only a passed gate is a success.** The original skill completes a run when the iteration
  limit is reached; here exit 0 means the quality gate passed. So ``finish`` (limit
  reached) leads to ``completed`` only with ``gate_passed``; ``exhaust`` (limit reached, gate
  not passed) and ``give_up`` (gate not passed, no fix left to apply) lead to ``failed``
  (exit 4). The ``outcome`` hook (:func:`.verdict.verdict`) says success only for a completed
  run with gate ``pass``, with a reason that is specific for success too.
* **The document says so itself.** A failing end sets ``status: failed`` and
  ``failure_reason`` (the field of the same name in ccw-loop's ``LoopState``; the original
  document has none) to the one-line reason, e.g. ``quality gate review: 70/100, 2 high; 2 issues
  left unfixed after 1 iteration (2 need judgement: ...)``; a failed gate is also appended to the
  original skill's ``errors`` (``action-complete``, not recoverable). The report's Outcome line,
  ``fsm run``'s last line and ``fsm status`` show the same text.
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
  scores the skill (the ``verify`` action keeps the original skill's name for scoring and gating).
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
* **A finding is a claim with evidence.** Each finding quotes the lines it rests on (a call
  from its first line to where its statement ends; for a whole file, what was measured) and
  says why nothing in the skill excuses it: what the rule looked for and did not find (a
  ``try`` around it, its section with its lines, the error-handling sections it read and what
  they speak of). The claims are the issue's ``evidence`` strings (the seeds' shape), the
  report lists them under each issue, and ``diagnosis/{area}-diagnosis.json`` keeps each
  finding with its ``quote`` and ``not_excused_because``.
* **Counts agree.** The report's Issues and Fixes lines are made by the functions that make the
  ``issues`` and ``fixes`` lines of ``fsm status`` (:mod:`.verdict`).
* **Restoring uses what every machine has**: ``mv SKILL SKILL.tuned && cp -a BACKUP SKILL``, run
  from the workspace; the tuned skill is kept, not deleted.
* **A fix is judged on what it is for** (:mod:`.fixes.properties`), not only on the rule going
  quiet: the code blocks it changed still parse in their language (``bash -n``, ``node
  --check`` when node is on PATH, JSON, YAML safe loader, Python ``ast``; a block that did not
  parse before is not held against it; a language without a parser is noted as unchecked), the
  calls and parses its issues named are still in the skill and now handled, and file names it
  writes in prose resolve. ``AppliedFix.verification_notes`` records what was checked.
* **Handling is structure or prose, never a token** (:mod:`.diagnosis.handling`): a call is
  handled inside a ``try`` whose ``catch``/``except`` does something, by a chained
  ``.catch(``, by a tested exit status in shell, or by prose in its section, its file's or
  SKILL.md's error-handling section saying what to do when it fails. Comments and strings are
  not code (:mod:`.lexer`): ``# try`` handles nothing, ``grep "Task("`` calls nothing.
* **Findings are measured** on hand-labelled CCW skills (``tests/machines/skill_tuning/
  labels``): precision at least 90% and no true finding lost, or the test fails. What the
  labels taught the rules: ``specs/`` code illustrates (only the field-name rule reads it, a
  schema there being the reference spelling); flow pictures with ``|``/``v`` connectors and
  blocks marked ``# BAD``/``// Before:`` are not code; a parse inside a real try/catch, or
  whose value is shape-checked (``if (!x)``, ``x?.y``, ``x.y ?? d``), is validated; a parse of
  a JSON file the skill ships is the skill's data (checked by the consistency checks); a local
  list filled a fixed number of times, or never put into text, is no history; a field or digest
  of the state is not the whole state; a router's alternative modes (no phase names the next,
  SKILL.md routes) are not a pipeline for the memory rules; a phase that writes its output to
  a file has its checkpoint.
* **Blind labels, held out** (``tests/machines/skill_tuning/blind``, ``scripts/
  skill_precision.py``): 24 more CCW skills labelled by helpers given only the skill and each
  rule's description, split in half before any tuning; rules changed looking at the tune half
  only, then measured once on the other. That measurement per rule is data the machine reads
  (:mod:`.diagnosis.trust`): a rule under 0.9 has its findings in ``issues_to_review`` (shown
  with their evidence in the report and ``fsm status``, not counted by the score or the gate,
  never fixed); a rule with no finding there is unmeasured and counted as before.
* **No boilerplate fixes.** The checkpoint fix names the skill's run-folder variable (defined
  or given by its environment) or the folder of the state file it writes; a skill with
  neither gets no appended text and the issue is left to judgement.
* **Nothing outside the workspace unless named.** A target skill (or an edited ``work_dir``)
  outside the workspace is refused at creation (exit 2) and by preflight before a run, unless
  option ``allow_outside`` names a folder holding it; options apply per command, so the run
  needs it too (or ``fsm.toml``).
* **Private stays private.** Backups keep the copied file's mode less the umask (a 0644 file
  under umask 077 is backed up 0600), manifests and side files get the umask's mode capped by
  the document's; a restore puts each file's own mode back.
* **Preflight** checks the one outside requirement: the ``fix_tool`` agent, when set, must be
  configured or on PATH. The target skill folder is not a preflight requirement: ``fsm new``
  already refuses a missing one, and one that disappears later is an action failure counted
  towards ``max_errors``, as the original skill describes.
"""
