#!/usr/bin/env bash
# Regenerate tests/journals/ccw-loop/*.ndjson: the journals of real ccw-loop runs (a tiny project,
# bash tasks, pytest, the stand-in codex of examples/stand-in-agents) that the replay-of-decisions
# tests feed changed definitions. Run from the checkout: bash scripts/decision-fixtures.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
fsm="$repo/.venv/bin/fsm"
out="$repo/tests/journals/ccw-loop"
stand_ins="$repo/examples/stand-in-agents"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
rm -f "$out"/*.ndjson

project() {  # a folder with calc.py, its tests and a task list of two bash tasks
  mkdir -p "$1" && cd "$1"
  printf 'def add(a, b):\n    return a + b\n' > calc.py
  printf 'from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n' > test_calc.py
  cat > tasks.jsonl <<'EOF'
{"task_id": "mul", "description": "Add calc.mul", "tool": "bash", "command": "grep -q 'def mul' calc.py || echo 'def mul(a, b): return a * b' >> calc.py"}
{"task_id": "check", "description": "Byte-compile calc.py", "tool": "bash", "command": "python -m py_compile calc.py"}
EOF
}

keep() {  # copy instance $2's journal as fixture $1
  cp .workflow/.loop/"$2".fsm/journal.ndjson "$out/$1.ndjson"
}

# 1. both tasks developed, the tests pass: completed
project "$work/passes"
printf '[machine.ccw-loop]\ntest_command = "python -m pytest -q"\ntask_list = "tasks.jsonl"\nfix_tool = "none"\n' > fsm.toml
"$fsm" new ccw-loop --id passes --set title="Add mul" > /dev/null
"$fsm" run ccw-loop passes -q > /dev/null || true
keep passes passes

# 2. a test the tasks do not satisfy, fixed by the stand-in codex: debug, fix, validate again
project "$work/fixed"
cat > fsm.toml <<'EOF'
[machine.ccw-loop]
test_command = "python -m pytest -q"
task_list = "tasks.jsonl"
fix_tool = "codex"

[agent.codex]
command = ["codex", "exec", "--sandbox", "workspace-write", "--skip-git-repo-check", "--json", "{prompt}"]
output = "codex-json"
EOF
printf '\n\ndef test_div():\n    from calc import div\n\n    assert div(6, 3) == 2\n' >> test_calc.py
"$fsm" new ccw-loop --id fixed --set title="Add div" > /dev/null
PATH="$stand_ins:$PATH" "$fsm" run ccw-loop fixed -q > /dev/null || true
keep fixed fixed

# 3. the same failing test without a fix agent: the loop ends failed, handing it over
project "$work/handed"
printf '[machine.ccw-loop]\ntest_command = "python -m pytest -q"\ntask_list = "tasks.jsonl"\nfix_tool = "none"\n' > fsm.toml
printf '\n\ndef test_pow():\n    from calc import pow2\n\n    assert pow2(3) == 9\n' >> test_calc.py
"$fsm" new ccw-loop --id handed --set title="Add pow2" > /dev/null
"$fsm" run ccw-loop handed -q > /dev/null || true
keep handed handed

# 4. a task whose command fails: the loop aborts
project "$work/aborted"
printf '[machine.ccw-loop]\ntest_command = "python -m pytest -q"\ntask_list = "tasks.jsonl"\nfix_tool = "none"\n' > fsm.toml
echo '{"task_id": "broken", "description": "A task that fails", "tool": "bash", "command": "exit 3"}' >> tasks.jsonl
"$fsm" new ccw-loop --id aborted --set title="Fail a task" > /dev/null
"$fsm" run ccw-loop aborted -q > /dev/null || true
keep aborted aborted

ls -l "$out"
