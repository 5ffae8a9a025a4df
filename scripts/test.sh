#!/usr/bin/env bash
# The test job: lint, type-check (strict on fsm and machines), then the test suite (with the
# browser tests, whose Chromium and Playwright browser-deps.sh installs, the PostgreSQL tests,
# whose server and driver postgres-deps.sh installs, and the agent CLI tests, whose CLIs
# agent-clis.sh installs from npm).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
# FSM_SKIP_DEPS=1: install nothing beyond .venv (no apt-get, no npm); the tests that need what
# is missing skip, each saying what it lacks.
if [ -z "${FSM_SKIP_DEPS:-}" ]; then
  bash "$root/scripts/browser-deps.sh"
  bash "$root/scripts/postgres-deps.sh"
  bash "$root/scripts/agent-clis.sh"
fi
cd "$root"
"$venv/bin/ruff" check .
"$venv/bin/mypy"
"$venv/bin/python" -m pytest "$@"
