#!/usr/bin/env bash
# Install what the PostgreSQL tests (tests/postgres/) need: psycopg 3 with its pool (the
# '[postgres]' extra, into the same .venv as setup.sh) and Debian's PostgreSQL server, which
# fsm.testing.postgres_cluster starts in a temporary folder for each test run (as the unprivileged
# 'postgres' account when run as root). Run by test.sh after setup.sh; safe to run on its own. It
# never fails the test job: when something cannot be installed it says what, and the PostgreSQL
# tests skip saying the same (on CI as root they fail instead).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${FSM_VENV:-$root/.venv}"

constraints="${FSM_CONSTRAINTS-$root/constraints.txt}"
constrained=()
if [ -n "$constraints" ]; then
  constrained=(-c "$constraints")
fi
stamp="$venv/.fsm-postgres-installed"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$root/constraints.txt" -nt "$stamp" ]; then
  # pip's output (the build backend's notes on editable installs among it) only when it fails
  pip_log="$(mktemp)"
  if "$venv/bin/python" -m pip install --quiet "${constrained[@]}" -e "$root[dev,postgres]" >"$pip_log" 2>&1; then
    touch "$stamp"
  else
    tail -n 20 "$pip_log" >&2
    echo "postgres-deps: could not install psycopg (pip install -e '.[postgres]'); the PostgreSQL tests will be skipped" >&2
  fi
  rm -f "$pip_log"
fi

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1 && [ -z "${FSM_PG_BINDIR:-}" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "postgres-deps: installing Debian's postgresql for the PostgreSQL tests (a minute)" >&2
    log="$(mktemp)"
    # The package's own cluster is not used (tests start theirs): do not start services.
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq postgresql; } >"$log" 2>&1; then
      tail -n 5 "$log" >&2
      echo "postgres-deps: apt-get install postgresql failed; the PostgreSQL tests will be skipped" >&2
    fi
    rm -f "$log"
  else
    echo "postgres-deps: the PostgreSQL server is missing and this is not root with apt-get: install Debian's postgresql package (or set FSM_PG_BINDIR) to run the PostgreSQL tests" >&2
  fi
fi
exit 0
