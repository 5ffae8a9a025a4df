#!/usr/bin/env bash
# The real-project check: ccw-loop on pinned PyPI packages with planted bugs and stand-in
# agents (one fixes, one does nothing, one hangs leaving a setsid child; a doctest-only bug in
# toolz, a unittest suite run by make in more-itertools), each outcome compared with an
# independent run of the package's tests. Prints a line per scenario; exits 1 when the
# loop's word and the tests disagree, 0 with a "skipped" line when PyPI cannot be reached.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
status=0
"$venv/bin/python" examples/real_project.py "$@" || status=$?
if [ "$status" -eq 3 ]; then
    exit 0  # the download failed: the line above says so
fi
exit "$status"
