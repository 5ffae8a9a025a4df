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
# The full run (no test named: options such as -q may be given, as CI does) also measures which
# declared edges the bundled machines' and the review-queue example's tests take, and holds each
# to its line of fsm_cov_fail_under in pyproject.toml (docs/coverage.md); a run of chosen tests
# (a path, -k or -m) is left alone.
chosen=""
value_of=""
for argument in "$@"; do
  if [ -n "$value_of" ]; then # the value of an option such as -p NAME is no test's name
    value_of=""
    continue
  fi
  case "$argument" in
    -k | -m | -k* | -m* | --deselect* | --lf | --last-failed) chosen=1 ;;
    -p | -o | -c | -W | -n | --rootdir | --basetemp) value_of=1 ;;
    -*) ;;
    *) chosen=1 ;;
  esac
done
if [ -z "$chosen" ]; then
  set -- --fsm-cov=ccw-loop,issue-manager,skill-tuning,review-queue "$@"
fi
# The skill-tuning precision measurements run on CCW's own skills, which are not this project's:
# named by CCW_SKILLS, or found beside the checkout (as CI has them); skipped, saying so, without.
if [ -z "${CCW_SKILLS:-}" ] && [ -d "$root/../shared/ccw-skills" ]; then
  export CCW_SKILLS="$(cd "$root/../shared/ccw-skills" && pwd)"
fi
"$venv/bin/python" -m pytest "$@"
