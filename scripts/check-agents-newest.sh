#!/usr/bin/env bash
# Check fsm's invocations against the newest release of each agent CLI it knows: installs them
# into .agent-clis-newest/ (scripts/agent-clis.sh --newest), then runs tests/test_agent_clis.py
# against them. A release that changed its flags is reported here before a user meets it.
#
#   bash scripts/check-agents-newest.sh [--report-only]
#
# Prints the versions that differ from scripts/agent-clis.versions, then the tests' result.
# Exit 0 when fsm's invocations pass with the newest versions, 1 when they do not (0 with
# --report-only, as CI runs it: a new release is news for the team, not a reason to refuse a
# change).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
report_only=0
if [ "${1:-}" = "--report-only" ]; then
  report_only=1
  shift
fi
venv="${FSM_VENV:-$root/.venv}"
prefix="$root/.agent-clis-newest"
rm -rf "$prefix"
FSM_AGENT_CLIS="$prefix" bash "$root/scripts/agent-clis.sh" --newest
if [ ! -f "$prefix/.fsm-installed" ]; then
  echo "check-agents-newest: could not install the newest agent CLIs (see above)" >&2
  [ "$report_only" = 1 ] && exit 0
  exit 1
fi
changed=""
while read -r package version; do
  case "$package" in ''|'#'*) continue ;; esac
  found="$(node -p "require('$prefix/node_modules/$package/package.json').version" 2>/dev/null)"
  if [ "$found" != "$version" ]; then
    changed="$changed  $package $version -> ${found:-?}"$'\n'
  fi
done <"$root/scripts/agent-clis.versions"
if [ -n "$changed" ]; then
  echo "check-agents-newest: newer releases than scripts/agent-clis.versions:"
  printf '%s' "$changed"
else
  echo "check-agents-newest: the newest releases are the ones in scripts/agent-clis.versions"
fi
cd "$root"
if FSM_AGENT_CLIS="$prefix" FSM_AGENT_CLIS_NEWEST=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_agent_clis.py "$@"; then
  echo "check-agents-newest: fsm's invocations pass with the newest releases"
  if [ -n "$changed" ]; then
    echo "check-agents-newest: to adopt them, update scripts/agent-clis.versions and 'tested' in fsm/process/agents.py"
  fi
  exit 0
fi
echo "check-agents-newest: DRIFT: a newest release refuses an invocation of fsm (above); add a profile in fsm/process/agents.py" >&2
[ "$report_only" = 1 ] && exit 0
exit 1
