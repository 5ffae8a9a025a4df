#!/usr/bin/env bash
# Install the newest dependency versions pyproject.toml allows into a venv of their own and run the
# test suite there: a release that breaks fsm is reported here before a user meets it on a fresh
# machine. scripts/setup.sh installs the versions of constraints.txt (what the suite last passed
# with); this script ignores them.
#
#   bash scripts/check-newest.sh [--report-only] [PYTEST ARGS...]
#
# Prints the versions that differ from constraints.txt, then the suite's result. Exit 0 when the
# suite passes with the newest versions, 1 when it fails (0 with --report-only, as CI runs it:
# a new release of a dependency is news for the team, not a reason to refuse a change).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
report_only=0
if [ "${1:-}" = "--report-only" ]; then
  report_only=1
  shift
fi
venv="${FSM_NEWEST_VENV:-$root/.venv-newest}"
rm -rf "$venv"
if ! FSM_VENV="$venv" FSM_CONSTRAINTS= bash "$root/scripts/setup.sh"; then
  echo "check-newest: could not install the newest versions (see above)" >&2
  [ "$report_only" = 1 ] && exit 0
  exit 1
fi
FSM_VENV="$venv" FSM_CONSTRAINTS= bash "$root/scripts/browser-deps.sh"
FSM_VENV="$venv" FSM_CONSTRAINTS= bash "$root/scripts/postgres-deps.sh"
"$venv/bin/python" -m pip install --quiet --upgrade -e "$root[dev,browser,postgres]"
newer="$("$venv/bin/python" -m pip freeze 2>/dev/null | grep -v '^-e\|^#\|^fsm' | grep -vxF -f <(grep -v '^#' "$root/constraints.txt"))"
if [ -n "$newer" ]; then
  echo "check-newest: versions that differ from constraints.txt:"
  echo "$newer" | sed 's/^/  /'
else
  echo "check-newest: the newest versions allowed are the ones in constraints.txt"
fi
cd "$root"
if "$venv/bin/ruff" check . && "$venv/bin/mypy" && "$venv/bin/python" -m pytest -p no:cacheprovider "$@"; then
  echo "check-newest: the suite passes with the newest versions allowed"
  if [ -n "$newer" ]; then
    echo "check-newest: to adopt them: $venv/bin/python -m pip freeze | grep -v '^-e\\|^#\\|^fsm' > constraints.txt (keep the header)"
  fi
  exit 0
fi
echo "check-newest: BREAK: the suite fails with the newest versions allowed (above); pin the range in pyproject.toml or fix fsm" >&2
[ "$report_only" = 1 ] && exit 0
exit 1
