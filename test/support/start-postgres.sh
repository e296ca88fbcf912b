#!/usr/bin/env bash
# Start a throwaway PostgreSQL 15 cluster for the store tests and print its URL on stdout.
#   eval "$(test/support/start-postgres.sh --env)"   # exports AGL_TEST_PG_URL and AGL_TEST_PG_DIR
#   test/support/start-postgres.sh --stop DIR        # stop it and delete its data directory
# initdb/pg_ctl refuse to run as root, so as root they run as the `postgres` user.
set -euo pipefail
BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
run_as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ "${1:-}" = "--stop" ]; then
  dir=${2:?usage: start-postgres.sh --stop DIR}
  run_as "$BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  exit 0
fi

dir=$(mktemp -d /tmp/agl-pg.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres "$dir"
port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
run_as "$BIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >/dev/null
run_as "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w start \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" >/dev/null
url="postgres://postgres@127.0.0.1:$port/postgres"
if [ "${1:-}" = "--env" ]; then
  echo "export AGL_TEST_PG_URL=$url AGL_TEST_PG_DIR=$dir"
else
  echo "$url"
fi
