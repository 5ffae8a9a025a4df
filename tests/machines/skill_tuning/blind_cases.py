"""What the tune half of the blind labels taught the rules: each lesson as a skill that triggers
the rule and one that does not (the held-out half was never read while writing these); run by
``test_diagnosis_rules``."""

from __future__ import annotations

from tests.machines.skill_tuning.conftest import phase

# (rule, files, (file, line) of the first finding)
BLIND_TRIGGERS: list[tuple[str, dict[str, str], tuple[str, int]]] = [
    (
        # an optional chain further down does not excuse the plain reach before it
        "dataflow.json_parse_unvalidated",
        {
            "phases/01-a.md": phase(
                "const spec = JSON.parse(text)\nlog(spec.scope.length)\n"
                "if (spec.findings?.length > 0) use(spec.findings)"
            )
        },
        ("phases/01-a.md", 4),
    ),
    (
        # a word such as source_schema elsewhere in the block validates nothing
        "dataflow.json_parse_unvalidated",
        {
            "phases/01-a.md": phase(
                "const data = JSON.parse(Read(file))\nuse(data.items)\n"
                "const entry = { source_schema: 'analyze' }"
            )
        },
        ("phases/01-a.md", 4),
    ),
    (
        # the skill's own state file re-read with no existence guard: agents edit it too
        "dataflow.json_parse_unvalidated",
        {
            "phases/01-a.md": phase(
                "const state = JSON.parse(Read(`${dir}/state.json`))\nnext(state.phase)\n"
                "Write(`${dir}/state.json`, JSON.stringify(state))"
            )
        },
        ("phases/01-a.md", 4),
    ),
    (
        # a prompt naming an agent CLI for its agent to run
        "agent.nested_agent_call",
        {
            "phases/01-a.md": phase(
                "Task({\n  prompt: `Explore the code.\n"
                "**Step 2: Semantic Analysis** (Gemini CLI)`\n})"
            )
        },
        ("phases/01-a.md", 4),
    ),
]

BLIND_QUIET: list[tuple[str, dict[str, str]]] = [
    (
        # spawn_agent returns an id; the result comes from wait_agent
        "agent.result_unvalidated",
        {"phases/01-a.md": phase("const agentId = spawn_agent({ message: 'x' })\nwait([agentId])")},
    ),
    (
        # a background Task returns a handle, not a result
        "agent.result_unvalidated",
        {"phases/01-a.md": phase("const job = Task({ prompt: 'x', run_in_background: true })")},
    ),
    (
        # the merged value is validated before it is used
        "dataflow.json_parse_unvalidated",
        {
            "phases/01-a.md": phase(
                "const current = JSON.parse(Read(path))\nconst next = { ...current, ...updates }\n"
                "if (!validateState(next)) throw new Error('bad')"
            )
        },
    ),
    (
        # a manifest the skill wrote itself, read back only when it exists, with a default
        "dataflow.json_parse_unvalidated",
        {
            "phases/01-a.md": phase(
                "Write(`${dir}/manifest.json`, JSON.stringify(manifest))\n"
                "const again = file_exists(`${dir}/manifest.json`)\n"
                "  ? JSON.parse(Read(`${dir}/manifest.json`))\n  : { items: [] }\n"
                "use(again.items)"
            )
        },
    ),
    (
        # a path inside a plain string is no reach into the parsed value
        "dataflow.json_parse_unvalidated",
        {
            "phases/01-a.md": phase(
                "const conclusions = JSON.parse(Read(latest))\n"
                "const dir = latest.replace('/conclusions.json', '')\n"
                "const gaps = conclusions.gaps ?? null"
            )
        },
    ),
    (
        # a tool's parameters are spelled as the tool wants them
        "dataflow.inconsistent_field_names",
        {
            "phases/01-a.md": phase(
                "const note = { sessionId: null }\n"
                "AskUserQuestion({ questions: [{ session_id: 'x' }] })\n"
                "note.sessionId = id"
            )
        },
    ),
]
