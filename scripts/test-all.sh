#!/usr/bin/env bash
# The README's test command: build, lint, typecheck and every test, with a real PostgreSQL server.
set -euo pipefail
cd "$(dirname "$0")/.."

pnpm build
pnpm lint
pnpm typecheck

if [ -z "${AGL_TEST_PG_URL:-}" ]; then
  if pg_env=$(bash test/support/start-postgres.sh --env); then
    eval "$pg_env"
    trap 'bash test/support/start-postgres.sh --stop "$AGL_TEST_PG_DIR" >/dev/null 2>&1 || true' EXIT
  else
    echo "warning: could not start PostgreSQL; the PostgreSQL tests will try to start their own" >&2
  fi
fi
echo "PostgreSQL for tests: ${AGL_TEST_PG_URL:-<per-test-process>}"

# Debian's Chromium for the dashboard's browser tests (AGL_CHROMIUM points elsewhere if you have one).
if [ -z "${AGL_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "warning: no /usr/bin/chromium; install Debian's chromium package (or set AGL_CHROMIUM) for the dashboard tests" >&2
  fi
fi

# Python 3 + Jinja2: the independent reference renderer of the chat-template tests. Checked here, with the
# PATH the tests get (pnpm puts node's own directory, often /usr/bin, ahead of pyenv-style shims).
if ! python3 -c "import jinja2" 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-jinja2 >/dev/null
  else
    echo "warning: python3 cannot import jinja2; install Debian's python3-jinja2 for the chat-template tests" >&2
  fi
fi

mkdir -p .runs
status=0
pnpm exec vitest run --reporter=default --reporter=json --outputFile.json=.runs/vitest.json "$@" || status=$?
node -e '
  const r = JSON.parse(require("fs").readFileSync(".runs/vitest.json", "utf8"));
  console.log(`Tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' || true
exit $status
