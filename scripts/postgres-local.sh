#!/usr/bin/env bash
# A private PostgreSQL server for trying fsm's PostgreSQL store on this machine, in minutes.
#
#   bash scripts/postgres-local.sh start [FOLDER]   # create (first time) and start; prints the URL
#   bash scripts/postgres-local.sh url [FOLDER]     # print the URL of the running server
#   bash scripts/postgres-local.sh stop [FOLDER]    # stop it (the data stays in FOLDER)
#
# FOLDER (default: .postgres-local in the checkout, which git ignores) holds the data and the
# server's Unix socket. The server listens on that socket only (no TCP port: nothing outside this
# machine, or another user's processes, can reach it), with trust authentication for the role
# 'fsm' and a database 'fsm'. PostgreSQL refuses to run as root: run as root, the server runs as
# the unprivileged 'postgres' account that Debian's package creates (or the one FSM_PG_USER
# names). The server's programs come from FSM_PG_BINDIR, Debian's /usr/lib/postgresql/<v>/bin,
# or PATH; 'bash scripts/postgres-deps.sh' installs them (and psycopg) when they are missing.
# For a team's shared server, see docs/scale-out.md: this one is for trying fsm, not for a fleet.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command="${1:-start}"
folder="${2:-$root/.postgres-local}"
case "$command" in
  start | stop | url) ;;
  *)
    echo "postgres-local: unknown command '$command' (start, url or stop)" >&2
    exit 2
    ;;
esac
mkdir -p "$folder"
folder="$(cd "$folder" && pwd)"
data="$folder/data"
socket="$folder/socket"

bindir="${FSM_PG_BINDIR:-}"
if [ -z "$bindir" ]; then
  for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -rn); do
    if [ -x "$candidate/initdb" ]; then
      bindir="$candidate"
      break
    fi
  done
fi
if [ -z "$bindir" ] && command -v initdb >/dev/null 2>&1; then
  bindir="$(dirname "$(command -v initdb)")"
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/pg_ctl" ]; then
  echo "postgres-local: the PostgreSQL server is not installed (no initdb and pg_ctl):" \
    "run 'bash scripts/postgres-deps.sh' (as root, it installs Debian's postgresql)," \
    "or set FSM_PG_BINDIR to the folder holding them" >&2
  exit 1
fi

# As root, the server's programs run as an unprivileged account; otherwise as this user.
as_server=()
if [ "$(id -u)" = "0" ]; then
  account="${FSM_PG_USER:-postgres}"
  if ! id "$account" >/dev/null 2>&1; then
    echo "postgres-local: running as root, and there is no '$account' account to run the" \
      "server as (PostgreSQL refuses root): create one, or set FSM_PG_USER to an existing one" >&2
    exit 1
  fi
  chown "$account" "$folder"
  as_server=(runuser -u "$account" --)
fi

port_file="$folder/port"
url_of() {
  echo "postgresql://fsm@/fsm?host=$socket&port=$(cat "$port_file")"
}

running() {
  [ -f "$data/postmaster.pid" ] && "${as_server[@]}" "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1
}

if [ "$command" = "url" ]; then
  if ! running; then
    echo "postgres-local: no server is running in $folder: 'bash scripts/postgres-local.sh start'" >&2
    exit 1
  fi
  url_of
  exit 0
fi

if [ "$command" = "stop" ]; then
  if running; then
    "${as_server[@]}" "$bindir/pg_ctl" -D "$data" stop -m fast -w >/dev/null
    echo "postgres-local: stopped (the data stays in $folder; 'start' starts it again)" >&2
  else
    echo "postgres-local: no server is running in $folder" >&2
  fi
  exit 0
fi

if running; then
  echo "postgres-local: already running in $folder" >&2
  url_of
  exit 0
fi

if [ ! -f "$data/PG_VERSION" ]; then
  echo "postgres-local: creating a cluster in $data (a few seconds)" >&2
  "${as_server[@]}" mkdir -p "$data" "$socket"
  "${as_server[@]}" "$bindir/initdb" -D "$data" -U fsm --auth=trust -E UTF8 --no-locale >"$folder/initdb.log" 2>&1 || {
    tail -n 5 "$folder/initdb.log" >&2
    echo "postgres-local: initdb failed (its output: $folder/initdb.log)" >&2
    exit 1
  }
fi
# A port number names the socket file (.s.PGSQL.<port>); no TCP port is opened. A free one is
# chosen the first time so that a second checkout's server never clashes with this one.
if [ ! -f "$port_file" ]; then
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$port_file"
fi
"${as_server[@]}" "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
  -o "-c listen_addresses='' -c unix_socket_directories='$socket' -c port=$(cat "$port_file")" \
  start >/dev/null || {
  tail -n 5 "$data/server.log" >&2 || true
  echo "postgres-local: the server did not start (its log: $data/server.log)" >&2
  exit 1
}
if ! "${as_server[@]}" "$bindir/psql" -h "$socket" -p "$(cat "$port_file")" -U fsm -d postgres -tAc \
  "SELECT 1 FROM pg_database WHERE datname = 'fsm'" | grep -q 1; then
  "${as_server[@]}" "$bindir/createdb" -h "$socket" -p "$(cat "$port_file")" -U fsm fsm
fi
echo "postgres-local: running in $folder; use it with:" >&2
echo "  export FSM_STORE='$(url_of)'" >&2
echo "  fsm store init" >&2
url_of
