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
# mypy cannot follow the import hook of an editable install, so a project that imports fsm
# (a machine of one's own, as docs/writing-a-machine.md builds) would see fsm as untyped. A
# folder holding only a link to fsm/, named in a .pth file, is a path mypy (and Python) can
# follow: fsm is found there, typed (py.typed), and still edited in place.
typing_dir="$venv/fsm-for-typing"
site_dir="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ "$(readlink "$typing_dir/fsm" 2>/dev/null)" != "$root/fsm" ] || [ ! -f "$site_dir/fsm-for-typing.pth" ]; then
  mkdir -p "$typing_dir"
  ln -sfn "$root/fsm" "$typing_dir/fsm"
  echo "$typing_dir" >"$site_dir/fsm-for-typing.pth"
fi
