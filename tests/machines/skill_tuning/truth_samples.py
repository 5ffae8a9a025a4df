"""Sample skills for the outcome, verification and precision scenarios (issue 9).

Each table reproduces one pattern seen in real skills: a deliberate camelCase to snake_case
mapping read by several JSON rule files, box diagrams and quoted examples that look like code,
an agent call a phase repeats, and the pieces an agent fix must not break (a linked spec, JSON
data keys, names the skill defines).
"""

from __future__ import annotations

import json

from tests.machines.skill_tuning.conftest import CLEAN_SKILL, END, FIXABLE_SKILL, JS, SKILL_MD, md

RULE_FILES: dict[str, str] = {
    f"specs/rules/{dimension}-rules.json": json.dumps(
        {
            "dimension": dimension,
            "prefix": dimension[:4].upper(),
            "rules": [
                {
                    "id": f"{dimension}-1",
                    "severity": "high",
                    "description": f"A {dimension} problem",
                    "fixExample": "// before\n// after",
                }
            ],
        },
        indent=2,
    )
    + "\n"
    for dimension in ("correctness", "security", "testing")
}
"""Three rule files whose rules say ``fixExample`` (camelCase), as the skill's data."""

RULE_FORMAT = md(
    """
    # Rule format

    Each file under specs/rules/ holds the rules of one dimension:

    ```json
    {
      "id": "null-check",
      "severity": "high",
      "fixExample": "// before / after"
    }
    ```
    """
)

APPLY_RULES = md(
    f"""
    # Applying the rules

    {JS}
    try {{
      const rules = JSON.parse(Read(`specs/rules/${{dimension}}-rules.json`)).rules;
      if (!Array.isArray(rules)) throw new Error('schema: rules must be a list');
      for (const rule of rules) {{
        findings.push({{
          id: rule.id,
          severity: rule.severity,
          fix_example: rule.fixExample
        }});
      }}
    }} catch (error) {{
      console.error('rules not applied', error);
    }}
    {END}
    """
)

FINDING_SCHEMA = md(
    """
    # State schema

    ```typescript
    interface Finding {
      id: string;
      severity: string;
      fix_example?: string;
    }
    ```
    """
)

MAPPING_SKILL: dict[str, str] = {
    **FIXABLE_SKILL,
    **RULE_FILES,
    "specs/rule-format.md": RULE_FORMAT,
    "phases/review/apply-rules.md": APPLY_RULES,
    "phases/state-schema.md": FINDING_SCHEMA,
}
"""The fixable sample plus a deliberate mapping: the findings the skill writes say
``fix_example`` (schema, the mapping line), the rule files it reads say ``fixExample``."""

DIAGRAMS = md(
    """
    ## Architecture

    ```
    ┌──────────────────────────────────────────┐
    │ Phase 1: collect                          │
    │ → ccw cli -p "analyse" --tool gemini      │
    │ → Task({ prompt: 'review' })              │
    └──────────────────────────────────────────┘
    ```

    ```
    +----------------------------------+
    | const r = Task({ prompt: x });   |
    | state.history.push(r);           |
    +----------------------------------+
    ```

    ```mermaid
    graph TD; A[Task prompt] --> B[ccw cli]
    ```

    > A call looks like `Task({ prompt: 'x' })`; in a quote:
    >
    > ```javascript
    > const q = Task({ prompt: 'x' });
    > state.history.push(q);
    > ```

    Run `ccw cli -p "..." --tool gemini` or keep `state.history.push(x)` short.

    ## Examples

    ```javascript
    const out = Task({ prompt: 'explore' });
    state.history.push(out);
    ```

    ## Notes

    For example:

    ```python
    messages.append(reply)
    ```
    """
)

DIAGRAM_SKILL: dict[str, str] = {**CLEAN_SKILL, "SKILL.md": SKILL_MD + "\n" + DIAGRAMS}
"""The clean sample whose SKILL.md draws its flow in box and ASCII diagrams, quotes calls in a
blockquote and in inline code, and shows bad code in example sections: nothing to find."""

REPEATED_CALL = f"""{JS}
const review = await Agent({{
  subagent_type: 'reviewer',
  prompt: `Review ${{file}}; when long, first run ccw cli -p "summarise ${{file}}" --tool gemini`
}});
{END}"""

REPEATED_SKILL: dict[str, str] = {
    **CLEAN_SKILL,
    "phases/02-analyse.md": CLEAN_SKILL["phases/02-analyse.md"]
    + "\n## Review\n\n"
    + REPEATED_CALL
    + "\n\n## Retry\n\nWhen the review timed out, run it once more:\n\n"
    + REPEATED_CALL
    + "\n",
}
"""The clean sample whose phase 2 calls a reviewer agent (a ``ccw cli`` inside its prompt) and
repeats the same call in a retry section: one call."""

EXPLORE = md(
    f"""
    # Phase 1: Explore

    Follow [the rule format](../specs/rule-format.md).

    {JS}
    const found = Task({{ subagent_type: 'explorer', prompt: 'List the files' }});
    if (!found) throw new Error('explorer returned nothing');
    {END}
    """
)

AGENT_FIX_SKILL: dict[str, str] = {
    "SKILL.md": SKILL_MD + "\nRules: [format](specs/rule-format.md).\n",
    "phases/01-explore.md": EXPLORE,
    "phases/02-plan.md": EXPLORE.replace("Explore", "Plan").replace("explorer", "planner"),
    "phases/review/apply-rules.md": APPLY_RULES,
    "specs/rule-format.md": RULE_FORMAT,
    **RULE_FILES,
}
"""Two agent calls without error handling (two high issues: gate review), fixes that need the
fix agent, in a skill with rule files, a mapping line and linked specs an agent fix could break."""

SIX_PHASES: dict[str, str] = {
    "SKILL.md": SKILL_MD,
    **{f"phases/0{n}-step.md": f"# Phase {n}\n\nDo step {n}.\n" for n in range(1, 7)},
}
"""Six phases, none saving a checkpoint: five medium issues (score 75, gate review)."""

WORK_DIR_SETUP = md(
    f"""

    ## Directory setup

    {JS}
    const workDir = `.workflow/.scratchpad/sample-${{Date.now()}}`;
    {END}
    """
)
