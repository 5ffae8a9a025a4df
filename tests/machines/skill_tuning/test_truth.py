"""Issue 9 on real engine runs: a run says what it achieved, a fix is kept only when the whole
skill still holds together, and pictures, quotes and repeated calls are not findings."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from fsm_machines.skill_tuning.backup import tree_bytes
from fsm_machines.skill_tuning.model import TuningState

from fsm.base.errors import MissingRequirementError
from fsm.process.executor import AgentCommand
from fsm.testing import Driver
from fsm.view.inspect import status
from tests.conftest import CliResult
from tests.machines.skill_tuning.conftest import MACHINE_YAML, Tuning, tune
from tests.machines.skill_tuning.test_scenarios import ROUND, events, report
from tests.machines.skill_tuning.truth_samples import (
    AGENT_FIX_SKILL,
    DIAGRAM_SKILL,
    MAPPING_SKILL,
    REPEATED_SKILL,
    SIX_PHASES,
    WORK_DIR_SETUP,
)

SKILL = ".claude/skills/sample-skill"
JUDGEMENT_REASON = (
    "quality gate review: 70/100, 2 high; 2 issues left unfixed after 1 iteration (2 need "
    "judgement: set fix_tool to give them to an agent, or fix by hand)"
)


def test_a_run_whose_gate_passes_exits_0_and_says_why(
    make_skill: Callable[..., Path], samples: SimpleNamespace, cli: Callable[..., CliResult]
) -> None:
    """fsm run on a fixable skill ends completed, exit 0, its last line naming the gate, the
    score and the fixes kept; fsm status and fsm ls --json show the same reason."""
    make_skill(samples.fixable)
    instance_id = cli("new", str(MACHINE_YAML), "--set", f"target_skill.path={SKILL}").out.strip()
    run = cli("run", str(MACHINE_YAML), instance_id)
    reason = "quality gate pass: 90/100, 2 medium left; 2 fixes kept; 2 iterations"
    assert run.code == 0
    assert run.out.strip().splitlines()[-1].endswith(f"after 14 steps: {reason}")
    shown = cli("status", str(MACHINE_YAML), instance_id, "--json").json()
    assert (shown["outcome"], shown["reason"]) == ("success", reason)
    [listed] = cli("ls", "--json").json()
    assert listed["reason"] == reason


def test_a_run_whose_gate_fails_exits_4_with_the_reason_everywhere(
    make_skill: Callable[..., Path], samples: SimpleNamespace, cli: Callable[..., CliResult]
) -> None:
    """A skill whose problems all need judgement, without fix_tool, ends failed (exit 4); the
    reason is the last line of fsm run, the outcome of fsm status (human and --json) and the
    document's own failure_reason, status and last error."""
    make_skill(samples.judgement)
    instance_id = cli("new", str(MACHINE_YAML), "--set", f"target_skill.path={SKILL}").out.strip()
    run = cli("run", str(MACHINE_YAML), instance_id)
    assert run.code == 4
    assert run.out.strip().splitlines()[-1] == (
        f"{instance_id}: failed in state 'failed' after 7 steps: {JUDGEMENT_REASON}"
    )
    shown = cli("status", str(MACHINE_YAML), instance_id, "--json").json()
    assert (shown["outcome"], shown["reason"], shown["status"]) == (
        "failure",
        JUDGEMENT_REASON,
        "failed",
    )
    assert JUDGEMENT_REASON in cli("status", str(MACHINE_YAML), instance_id).out


def test_the_document_itself_says_the_run_failed(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """A dashboard reading only state.json sees the failure: status failed, failure_reason,
    and the seed's errors list ending with the same reason."""
    instance = tune(tuning, make_skill(samples.judgement))
    instance.run(max_steps=200)
    data = instance.data
    assert (data["status"], data["failure_reason"]) == ("failed", JUDGEMENT_REASON)
    assert data["errors"][-1]["message"] == JUDGEMENT_REASON
    assert data["errors"][-1]["recoverable"] is False


def test_report_counts_agree_with_fsm_status(
    make_skill: Callable[..., Path], tuning: Tuning, agent_script: Callable[[str], AgentCommand]
) -> None:
    """The report's issue and fix lines are the issues and fixes lines of fsm status, for a run
    with a kept fix and a rolled-back one."""
    agent = agent_script(fix_agent("explorer", "  state.history.push(found);\n"))
    instance = tune(
        tuning, make_skill(AGENT_FIX_SKILL), agents={"codex": agent}, options={"fix_tool": "codex"}
    )
    instance.run(max_steps=200)
    summary = status(instance.instance).summary
    text = report(tuning, instance)
    assert f"- Issues: {summary['issues']}\n" in text
    assert f"- Fixes: {summary['fixes']}\n" in text
    assert summary["fixes"] == (
        "1 kept (verified), 1 rolled back, 0 not applied, 0 pending, 0 need judgement"
    )


def test_the_restore_command_of_the_report_works_with_plain_mv_and_cp(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """The report restores the skill with mv and cp -a (no rsync): run as written in the
    workspace, it puts the original bytes back and keeps the tuned skill beside them."""
    root = make_skill(samples.fixable)
    original = tree_bytes(root)
    instance = tune(tuning, root)
    instance.run(max_steps=200)
    tuned = tree_bytes(root)
    assert tuned != original
    text = report(tuning, instance)
    assert "rsync" not in text
    command = text.split("To restore it, from the workspace folder: `")[1].split("`")[0]
    assert command.startswith("mv ") and " && cp -a " in command
    subprocess.run(["sh", "-c", command], cwd=tuning.root, check=True)
    assert tree_bytes(root) == original
    assert tree_bytes(root.with_name("sample-skill.tuned")) == tuned


def test_a_deliberate_camel_to_snake_mapping_is_left_alone(
    make_skill: Callable[..., Path], tuning: Tuning
) -> None:
    """``fix_example: rule.fixExample``, read from three rule files that say fixExample, is no
    inconsistency: nothing proposes to rename it, the run fixes the rest and passes, and the
    mapping line, the rule files and the format spec keep their bytes."""
    root = make_skill(MAPPING_SKILL)
    original = tree_bytes(root)
    instance = tune(tuning, root, max_iterations=3)
    result = instance.run(max_steps=200)
    assert (result.outcome, result.exit_code) == ("completed", 0)
    doc = instance.doc
    assert all(
        fix.strategy != "schema_enforcement" or "rename" not in fix.description
        for fix in doc.proposed_fixes
    )
    assert not any(i.rule == "dataflow.inconsistent_field_names" for i in doc.issues)
    dataflow = doc.diagnosis.dataflow
    assert dataflow is not None
    assert "dataflow.inconsistent_field_names" not in dataflow.details.patterns_matched
    now = tree_bytes(root)
    for path in ("phases/review/apply-rules.md", "specs/rule-format.md", "phases/state-schema.md"):
        assert now[path] == original[path], path
    assert all(now[p] == original[p] for p in original if p.endswith(".json"))


def test_diagrams_and_quoted_examples_are_not_code(
    make_skill: Callable[..., Path], tuning: Tuning
) -> None:
    """Box and ASCII diagrams with call-like lines (``│ → ccw cli ... │``), a mermaid graph, a
    blockquoted call, inline code and example sections produce no finding: the skill passes at
    once and is not touched."""
    root = make_skill(DIAGRAM_SKILL)
    original = tree_bytes(root)
    instance = tune(tuning, root)
    result = instance.run(max_steps=200)
    assert events(result) == ["init", *ROUND, "complete"]
    assert result.exit_code == 0
    doc = instance.doc
    assert doc.issues == [] and doc.quality_score == 100
    assert tree_bytes(root) == original


def test_an_agent_call_a_phase_repeats_is_one_finding(
    make_skill: Callable[..., Path], tuning: Tuning
) -> None:
    """A call whose prompt mentions ``ccw cli``, written again in a retry section, is one call:
    each agent rule reports it once, located at its statement (first line to last)."""
    instance = tune(tuning, make_skill(REPEATED_SKILL), max_iterations=1)
    instance.run(max_steps=200)
    doc = instance.doc
    by_rule = {issue.rule: issue for issue in doc.issues}
    assert set(by_rule) >= {"agent.call_without_error_handling", "agent.nested_agent_call"}
    for rule in ("agent.call_without_error_handling", "agent.nested_agent_call"):
        issue = by_rule[rule]
        assert len(issue.evidence) == 1, issue.evidence
        assert (issue.location.line_start, issue.location.line_end) == (18, 21)
    agent = doc.diagnosis.agent
    assert agent is not None and len(agent.details.evidence) == 3


def fix_agent(breaks: str, extra: str = "", side_effect: str = "") -> str:
    """A stand-in fix agent: it really fixes the file its prompt names (the call wrapped in a
    try/catch that rethrows); when that file contains ``breaks`` it also puts the code line
    ``extra`` inside the try and runs the Python ``side_effect``."""
    return f"""
import pathlib, re, sys
target = pathlib.Path(re.search(r"in (phases/[\\w./-]+\\.md)", sys.argv[1]).group(1))
text = target.read_text()
start = text.index("const found")
end = text.index("```", start)
body = "".join("  " + line + "\\n" for line in text[start:end].splitlines())
broken = {breaks!r} in text
inside = {extra!r} if broken else ""
wrapped = "try {{\\n" + body + inside + "}} catch (error) {{\\n  throw error;\\n}}\\n"
target.write_text(text[:start] + wrapped + text[end:])
if broken:
    pass
{textwrap.indent(side_effect, "    ")}"""


_SIDE_EFFECTS = {
    "json-key-renamed": (
        "p = pathlib.Path('phases/review/apply-rules.md')\n"
        "p.write_text(p.read_text().replace('rule.fixExample', 'rule.fix_example'))\n",
        "phases/review/apply-rules.md:11 reads `.fix_example` instead of `.fixExample`, but the "
        "skill's JSON data has `fixExample`, not `fix_example`",
    ),
    "undefined-placeholder": (
        "target.write_text(target.read_text() + '\\nSave the list to `{sessionDir}/l.json`.\\n')\n",
        "phases/01-explore.md:14 mentions {sessionDir}, a name the skill never defines",
    ),
    "unclosed-fence": (
        "target.write_text(target.read_text() + '\\n```javascript\\nconst more = 1;\\n')\n",
        "phases/01-explore.md:14: the code fence opened here is never closed",
    ),
    "linked-spec-deleted": (
        "pathlib.Path('specs/rule-format.md').unlink()\n",
        "SKILL.md refers to specs/rule-format.md, which does not exist",
    ),
    "data-file-deleted": (
        "pathlib.Path('specs/rules/testing-rules.json').unlink()\n",
        "the data file specs/rules/testing-rules.json was deleted",
    ),
}


@pytest.mark.parametrize(
    ("extra", "side_effect", "reason"),
    [
        pytest.param(
            "  state.history.push(found);\n",
            "",
            "adds a finding: history grows without bound (context.unbounded_history) in "
            "phases/01-explore.md:9: state.history.push(found);",
            id="adds-a-finding",
        ),
        pytest.param(
            "  Write(`${outputRoot}/found.json`, JSON.stringify(found));\n",
            "",
            "phases/01-explore.md:9 reads `outputRoot`, a name the skill never defines",
            id="undefined-variable",
        ),
        *(
            pytest.param("", code, reason, id=name)
            for name, (code, reason) in _SIDE_EFFECTS.items()
        ),
    ],
)
def test_an_agent_fix_that_breaks_the_skill_is_rolled_back_with_the_reason(
    extra: str,
    side_effect: str,
    reason: str,
    make_skill: Callable[..., Path],
    tuning: Tuning,
    agent_script: Callable[[str], AgentCommand],
) -> None:
    """An agent fix that removes its issue but adds a finding, reads an undefined name, renames
    a JSON key the rule files use, leaves a fence open, or deletes a linked spec or a data file
    is rolled back: the skill gets its bytes back and the record says why. The other call's
    clean fix is kept, and the run passes with the rolled-back issue left and said so."""
    root = make_skill(AGENT_FIX_SKILL)
    original = tree_bytes(root)
    agent = agent_script(fix_agent("explorer", extra, side_effect))
    instance = tune(tuning, root, agents={"codex": agent}, options={"fix_tool": "codex"})
    result = instance.run(max_steps=7)
    assert events(result)[-1] == "apply_fix"
    [record] = instance.doc.applied_fixes
    assert (record.fix_id, record.verification_result, record.rollback_available) == (
        "FIX-001",
        "rolled_back",
        False,
    )
    assert reason in (record.failure_reason or "")
    assert tree_bytes(root) == original
    rest = instance.run(max_steps=200)
    assert (rest.outcome, rest.exit_code) == ("completed", 0)
    assert rest.message == (
        "quality gate pass: 85/100, 1 high left; 1 fix kept, 1 rolled back; 3 iterations"
    )
    assert f"rolled back: {record.failure_reason}" in report(tuning, instance)


def test_an_agent_fix_that_breaks_nothing_is_kept(
    make_skill: Callable[..., Path], tuning: Tuning, agent_script: Callable[[str], AgentCommand]
) -> None:
    """The same agent without a breakage: its fix is kept and the gate passes (exit 0)."""
    root = make_skill(AGENT_FIX_SKILL)
    agent = agent_script(fix_agent("no file has this"))
    instance = tune(tuning, root, agents={"codex": agent}, options={"fix_tool": "codex"})
    result = instance.run(max_steps=200)
    assert (result.outcome, result.exit_code) == ("completed", 0)
    doc = instance.doc
    assert [(r.fix_id, r.verification_result) for r in doc.applied_fixes] == [("FIX-001", "pass")]
    assert "try {" in (root / "phases/01-explore.md").read_text(encoding="utf-8")


STATE_FILE_SETUP = """

## State

```javascript
Write('.workflow/sample/state.json', JSON.stringify(state));
```
"""


@pytest.mark.parametrize(
    ("setup", "line"),
    [
        pytest.param(
            WORK_DIR_SETUP,
            "write it to `{workDir}/checkpoints/01-step.json`.",
            id="skill-defines-workDir",
        ),
        pytest.param(
            STATE_FILE_SETUP,
            "write it to `.workflow/sample/checkpoints/01-step.json`, beside the state file "
            "`.workflow/sample/state.json`.",
            id="skill-writes-a-state-file",
        ),
    ],
)
def test_the_checkpoint_fix_names_only_what_the_skill_defines(
    setup: str, line: str, make_skill: Callable[..., Path], tuning: Tuning
) -> None:
    """The checkpoint section names the skill's run folder, or the folder of the state file it
    writes, and the phase it is in; the fix is verified and kept, and the gate passes."""
    skill = {**SIX_PHASES, "SKILL.md": SIX_PHASES["SKILL.md"] + setup}
    root = make_skill(skill)
    instance = tune(tuning, root)
    result = instance.run(max_steps=200)
    assert (result.outcome, result.exit_code) == ("completed", 0)
    text = (root / "phases/01-step.md").read_text(encoding="utf-8")
    assert line in text.splitlines()
    doc = instance.doc
    assert all(r.verification_result == "pass" for r in doc.applied_fixes)


def test_no_checkpoint_boilerplate_where_the_skill_has_nothing_to_refer_to(
    make_skill: Callable[..., Path], tuning: Tuning
) -> None:
    """A skill with neither a run folder nor a state file gets no appended checkpoint text: the
    five issues are left to judgement (no change proposed), every phase keeps its bytes, and the
    run fails saying they need judgement."""
    root = make_skill(SIX_PHASES)
    original = tree_bytes(root)
    instance = tune(tuning, root)
    result = instance.run(max_steps=200)
    assert (result.outcome, result.exit_code) == ("failed", 4)
    doc = instance.doc
    assert [f.changes for f in doc.proposed_fixes] == [[]] * 5
    assert doc.applied_fixes == []
    assert tree_bytes(root) == original
    assert "(5 need judgement" in (doc.failure_reason or "")


def test_a_missing_fix_agent_refuses_the_run_before_any_work(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """fix_tool naming an agent that is neither configured nor on PATH makes the run refuse
    with one line saying how to configure it; the instance is not started."""
    instance: Driver[TuningState] = tune(
        tuning, make_skill(samples.judgement), options={"fix_tool": "no-such-agent-xyz"}
    )
    before = instance.data
    with pytest.raises(MissingRequirementError) as refused:
        instance.run(max_steps=200)
    message = str(refused.value)
    assert "agent 'no-such-agent-xyz' (option fix_tool) cannot run" in message
    assert "[agent.no-such-agent-xyz]" in message
    assert instance.data == before
