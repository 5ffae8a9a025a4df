#!/usr/bin/env bash
# The main job: drive every bundled machine on the sample workspaces in examples/ and write the
# diagrams. Output goes to demo-output/ (recreated on every run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
"$venv/bin/python" examples/demo.py "$@"
