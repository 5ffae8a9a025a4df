#!/usr/bin/env bash
# Create .venv (if needed) and install fsm with its development tools into it.
# Sourced by demo.sh and test.sh; safe to run on its own.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${FSM_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.fsm-installed"
# constraints.txt: the versions the suite last passed with (FSM_CONSTRAINTS= installs the newest
# versions pyproject.toml allows instead, as scripts/check-newest.sh does).
constraints="${FSM_CONSTRAINTS-$root/constraints.txt}"
constrained=()
if [ -n "$constraints" ]; then
  constrained=(-c "$constraints")
fi
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$root/constraints.txt" -nt "$stamp" ]; then
  # pip's output (the build backend's notes on editable installs among it) only when it fails
  log="$venv/.fsm-install.log"
  if ! { "$venv/bin/python" -m pip install --quiet --upgrade pip &&
    "$venv/bin/python" -m pip install --quiet "${constrained[@]}" -e "$root[dev]"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "setup: installing fsm into $venv failed (the whole output: $log)" >&2
    exit 1
  fi
  touch "$stamp"
fi
