#!/usr/bin/env bash
# Install the agent CLIs fsm knows (codex, claude, gemini, qwen) from npm at the versions of
# scripts/agent-clis.versions into .agent-clis/ of the checkout, where tests/test_agent_clis.py
# checks every invocation fsm gives them against their real argument parsers (no request is
# ever sent: --help, --version, and runs that stop before any request for want of credentials).
# Run by test.sh after setup.sh; safe to run on its own; runs npm once per versions file (a
# stamp). It never fails the test job: when npm is missing or the registry cannot be reached it
# says so and the tests that need the CLIs skip saying the same (on CI as root they fail).
#
#   bash scripts/agent-clis.sh [--newest]
#
# --newest installs the newest release of each into .agent-clis-newest/ instead
# (scripts/check-agents-newest.sh uses it). FSM_AGENT_CLIS names another folder.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
versions="$root/scripts/agent-clis.versions"
newest=0
if [ "${1:-}" = "--newest" ]; then
  newest=1
  prefix="${FSM_AGENT_CLIS:-$root/.agent-clis-newest}"
else
  prefix="${FSM_AGENT_CLIS:-$root/.agent-clis}"
fi
stamp="$prefix/.fsm-installed"
if [ "$newest" = 0 ] && [ -f "$stamp" ] && [ ! "$versions" -nt "$stamp" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "agent-clis: npm is not installed (install Node.js with npm); the agent CLI tests will be skipped" >&2
  exit 0
fi
specs=()
while read -r package version; do
  case "$package" in ''|'#'*) continue ;; esac
  if [ "$newest" = 1 ]; then
    specs+=("$package@latest")
  else
    specs+=("$package@$version")
  fi
done <"$versions"
mkdir -p "$prefix"
log="$(mktemp)"
echo "agent-clis: installing ${specs[*]} into $prefix (a minute or two, once)" >&2
if timeout 900 npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "${specs[@]}" >"$log" 2>&1; then
  touch "$stamp"
else
  tail -n 5 "$log" >&2
  echo "agent-clis: npm install failed (is the npm registry reachable?); the agent CLI tests will be skipped" >&2
fi
rm -f "$log"
exit 0
