"""What counts as code in a skill's markdown, and the names a code line defines and reads."""

from __future__ import annotations

import pytest
from fsm_machines.skill_tuning.markdown import parse_code_blocks
from fsm_machines.skill_tuning.names import LineNames, block_names, placeholders

CALL = "const r = Task({ prompt: 'x' });"


@pytest.mark.parametrize(
    ("markdown", "code"),
    [
        pytest.param(f"```javascript\n{CALL}\n```\n", [CALL], id="javascript"),
        pytest.param(f"```\n{CALL}\n```\n", [CALL], id="untagged-code"),
        pytest.param("```\n┌──────┐\n│ → ccw cli -p x │\n└──────┘\n```\n", [], id="box-diagram"),
        pytest.param(
            f"```javascript\n{CALL}\n│ → ccw cli -p x │\n```\n", [CALL], id="box-line-in-code"
        ),
        pytest.param(
            "```js\nlog('│ done'); Task(x);\n```\n",
            ["log('│ done'); Task(x);"],
            id="box-char-in-a-string",
        ),
        pytest.param(
            f"```js\n+------+\n| {CALL} |\n+------+\nnext();\n```\n",
            ["next();"],
            id="ascii-frame",
        ),
        pytest.param(f"```text\n{CALL}\n```\n", [], id="text-block"),
        pytest.param("```mermaid\ngraph TD; A[Task(x)] --> B\n```\n", [], id="mermaid"),
        pytest.param(f"## Examples\n\n```javascript\n{CALL}\n```\n", [], id="example-heading"),
        pytest.param(f"### 反例\n\n```javascript\n{CALL}\n```\n", [], id="example-heading-zh"),
        pytest.param(f"For example:\n\n```javascript\n{CALL}\n```\n", [], id="example-lead"),
        pytest.param(f"```javascript example\n{CALL}\n```\n", [], id="example-info"),
        pytest.param(f"> ```javascript\n> {CALL}\n> ```\n", [], id="blockquote"),
        pytest.param(f"Call `{CALL}` when needed.\n", [], id="inline-code"),
        pytest.param(
            f"## Error handling\n\n```javascript\n{CALL}\n```\n", [CALL], id="not-an-example"
        ),
    ],
)
def test_only_code_lines_are_code(markdown: str, code: list[str]) -> None:
    """Diagrams, pictures, example sections and quotes are not code; code is."""
    lines = [text for block in parse_code_blocks(markdown) for _n, text in block.numbered()]
    assert lines == code


def test_an_unclosed_fence_runs_to_the_end_and_says_so() -> None:
    """A fence never closed makes a block to the end of the file, marked not closed."""
    [block] = parse_code_blocks("text\n```js\na();\nb();\n")
    assert (block.closed, block.numbered()) == (False, [(3, "a();"), (4, "b();")])


def _names(code: str, lang: str = "javascript") -> dict[int, LineNames]:
    [block] = parse_code_blocks(f"```{lang}\n{code}\n```\n")
    return block_names(block)


def test_names_of_javascript_lines() -> None:
    """Definitions, free names, properties (dotted or subscripted) and written keys, with
    strings, comments and regex literals skipped and template expressions kept."""
    names = _names(
        "const { a, b: c } = load(workDir);  // read workDir\n"
        "const out = rule['fixExample'] + `x ${state.count} y`;\n"
        "findings.push({ fix_example: rule.fixExample, 'id': 1 });\n"
        "const m = text.match(/\\d+\\s(w)/g);\n"
        "items.map((item, i) => item.name);"
    )
    first, second, third, fourth, fifth = (names[n] for n in sorted(names))
    assert first.defined == {"a", "c"} and first.roots >= {"load", "workDir"}
    assert second.props == {"fixExample", "count"} and second.roots == {"rule", "state"}
    assert third.keys == {"fix_example", "id"} and third.props == {"push", "fixExample"}
    assert fourth.roots == {"text"}
    assert fifth.defined == {"item", "i"} and fifth.roots == {"items"}


def test_a_template_literal_may_span_lines() -> None:
    """Prompt text inside a multi-line template literal reads no names; its ${...} does."""
    names = _names("Task({\n  prompt: `\nReturn JSON with stateUpdates\n${workDir}\n`\n});")
    assert names[4].roots == set()
    assert names[5].roots == {"workDir"}


def test_names_of_python_and_shell_lines() -> None:
    """Python assignments, parameters and loop variables are definitions; shell reads are
    ``$NAME``."""
    python = _names("def run(state, limit=3):\n    for key, value in state.items():\n        pass")
    assert python[2].defined == {"run", "state", "limit"}
    assert python[3].defined == {"key", "value"}
    shell = _names('OUT=/tmp/x\nccw cli -p "$PROMPT" > "${OUT}/a"', "bash")
    assert shell[2].defined == {"OUT"} and shell[3].roots == {"PROMPT", "OUT"}


def test_placeholders_in_prose() -> None:
    """``{name}`` and ``${name}`` in a sentence are placeholders; JSON braces are not."""
    assert placeholders("Write `{workDir}/a.json` and ${sessionDir}, not { a: 1 }") == {
        "workDir",
        "sessionDir",
    }
