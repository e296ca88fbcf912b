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

mkdir -p .runs
status=0
pnpm exec vitest run --reporter=default --reporter=json --outputFile.json=.runs/vitest.json "$@" || status=$?
node -e '
  const r = JSON.parse(require("fs").readFileSync(".runs/vitest.json", "utf8"));
  console.log(`Tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' || true
exit $status
