#!/usr/bin/env bash
# The suite's reliability check: ROUNDS rounds (default 5) of two full test suites run at once,
# so that every run has another suite beside it (tests wait on events and files, never on
# guessed sleeps: this is how that is checked). One line per round; exit 1 if any run failed.
# A second argument runs only those tests (a file or folder of tests/) instead of the suite.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${1:-5}"
target="${2:-tests}"
logs="$(mktemp -d)"
cd "$root"
failed=0
for round in $(seq 1 "$rounds"); do
  for side in a b; do
    .venv/bin/python -m pytest -q -p no:cacheprovider "$target" >"$logs/$round$side.log" 2>&1 &
  done
  codes=()
  for job in $(jobs -p); do
    wait "$job"
    codes+=("$?")
  done
  line="round $round:"
  for side in a b; do
    line="$line $(tail -1 "$logs/$round$side.log")"
  done
  echo "$line"
  for code in "${codes[@]}"; do
    [ "$code" -eq 0 ] || failed=1
  done
done
echo "logs in $logs"
exit "$failed"
