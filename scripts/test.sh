#!/usr/bin/env bash
# The test job: lint, type-check (strict on fsm and machines), then the test suite (with the
# browser tests, whose Chromium and Playwright browser-deps.sh installs, the PostgreSQL tests,
# whose server and driver postgres-deps.sh installs, and the agent CLI tests, whose CLIs
# agent-clis.sh installs from npm).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
bash "$root/scripts/browser-deps.sh"
bash "$root/scripts/postgres-deps.sh"
bash "$root/scripts/agent-clis.sh"
cd "$root"
"$venv/bin/ruff" check .
"$venv/bin/mypy"
"$venv/bin/python" -m pytest "$@"
