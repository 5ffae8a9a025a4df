#!/usr/bin/env bash
# Install what the browser tests (tests/serve/test_browser.py) need: Playwright for Python (the
# '[browser]' extra, into the same .venv as setup.sh) and Debian's Chromium at /usr/bin/chromium,
# which Playwright launches (it never downloads a browser of its own). Run by test.sh after
# setup.sh; safe to run on its own. It never fails the test job: when something cannot be
# installed it says what, and the browser tests skip saying the same (on CI as root they fail).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${FSM_VENV:-$root/.venv}"
chromium="${FSM_CHROMIUM:-/usr/bin/chromium}"

constraints="${FSM_CONSTRAINTS-$root/constraints.txt}"
constrained=()
if [ -n "$constraints" ]; then
  constrained=(-c "$constraints")
fi
stamp="$venv/.fsm-browser-installed"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$root/constraints.txt" -nt "$stamp" ]; then
  # pip's output (the build backend's notes on editable installs among it) only when it fails
  pip_log="$(mktemp)"
  if "$venv/bin/python" -m pip install --quiet "${constrained[@]}" -e "$root[dev,browser]" >"$pip_log" 2>&1; then
    touch "$stamp"
  else
    tail -n 20 "$pip_log" >&2
    echo "browser-deps: could not install Playwright (pip install -e '.[browser]'); the browser tests will be skipped" >&2
  fi
  rm -f "$pip_log"
fi

if [ ! -x "$chromium" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "browser-deps: installing Debian's chromium for the browser tests (a minute or two)" >&2
    log="$(mktemp)"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$log" 2>&1; then
      tail -n 5 "$log" >&2
      echo "browser-deps: apt-get install chromium failed; the browser tests will be skipped" >&2
    fi
    rm -f "$log"
  else
    echo "browser-deps: $chromium is missing and this is not root with apt-get: install Debian's chromium package (apt-get install chromium) to run the browser tests" >&2
  fi
fi
exit 0
