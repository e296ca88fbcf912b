/**
 * Database CPU per call of the PostgreSQL store's hot statements, old shape against new, interleaved
 * in one run on one durable cluster (fsync and synchronous commit on): the CPU time of the backend
 * process serving the calls (/proc), its wall time per call, and the same call with synchronous_commit
 * off (only to show how much of the wall time is the commit's WAL flush; the store never does this).
 *   - a single-span export (an OTLP request, one add_span): agl_ingest_spans (migration 3) vs
 *     agl_ingest_attempt_spans (migration 4) vs agl_ingest_one_span (migration 6), what
 *     pg-span-ingest.ts now calls for it;
 *   - 4 spans of 4 rollouts (a group-committed batch): agl_ingest_spans, for reference;
 *   - locking a rollout and reading its latest attempt: two statements vs agl_lock_rollouts (migration 5).
 *
 *   pnpm exec tsx bench/store-pg-calls.ts   (env: BENCH_CALLS=1500, BENCH_ROUNDS=3)
 */
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import pg from "pg";
import {
  callForMany,
  callForOneAttempt,
  callForOneSpan,
} from "../packages/store/src/postgres/pg-span-ingest.js";
import { PostgresLightningStore } from "../packages/store/src/postgres/postgres-store.js";
import { benchSpan } from "./store-pg-span.js";
import { startBenchBackends } from "./support/bench-backends.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 1500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const backends = await startBenchBackends();

const cpuMs = (pid: number): number => {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
};

type Target = { rid: string; aid: string };
type Call = (c: pg.Client, targets: Target[], i: number) => Promise<unknown>;

const span = (t: Target, i: number) => benchSpan(t.rid, t.aid, `s${i}`);

const calls: Record<string, Call> = {
  "single-span export, agl_ingest_spans (v3)": (c, t, i) =>
    callForMany(c, [{ span: span(t[i % 4]!, i), assign: true }], Date.now() / 1000),
  "single-span export, agl_ingest_attempt_spans (v4)": (c, t, i) =>
    callForOneAttempt(c, [{ span: span(t[i % 4]!, i), assign: true }], Date.now() / 1000),
  "single-span export, agl_ingest_one_span (v6)": (c, t, i) =>
    callForOneSpan(c, { span: span(t[i % 4]!, i), assign: true }, Date.now() / 1000),
  "4 spans of 4 rollouts, agl_ingest_spans (v3)": (c, t, i) =>
    callForMany(
      c,
      t.map((x) => ({ span: span(x, i), assign: true })),
      Date.now() / 1000,
    ),
  "lock + latest attempt, two statements (in a transaction)": async (c, t, i) => {
    await c.query("BEGIN");
    const { rows } = await c.query({
      name: "lock",
      text: "SELECT r.*, (r.input IS NULL) AS input_absent FROM rollouts r WHERE r.rollout_id = ANY($1::text[]) ORDER BY r.rollout_id FOR UPDATE OF r",
      values: [[t[i % 4]!.rid]],
    });
    await c.query({
      name: "latest",
      text: "SELECT a.* FROM attempts a JOIN unnest($1::text[], $2::int[]) AS t(rid, seq) ON a.rollout_id = t.rid AND a.sequence_id = t.seq",
      values: [rows.map((r) => r.rollout_id), rows.map((r) => r.attempt_count)],
    });
    await c.query("COMMIT");
  },
  "lock + latest attempt, agl_lock_rollouts (v5, in a transaction)": async (c, t, i) => {
    await c.query("BEGIN");
    await c.query({
      name: "lock5",
      text: "SELECT * FROM agl_lock_rollouts($1::text[])",
      values: [[t[i % 4]!.rid]],
    });
    await c.query("COMMIT");
  },
};

/** CALLS calls on a fresh database: backend CPU and wall time per call. */
async function measure(call: Call, syncCommit: boolean): Promise<{ cpu: number; wall: number }> {
  const url = await backends.uriFor("postgres");
  const store = await PostgresLightningStore.connect(url, { listen: false, watchdog: false });
  const targets: Target[] = [];
  for (let k = 0; k < 4; k++) {
    const r = await store.startRollout({ input: k });
    targets.push({ rid: r.rollout_id, aid: r.attempt.attempt_id });
  }
  await store.close();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    if (!syncCommit) await c.query("SET synchronous_commit = off");
    const pid = (await c.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    // Warm up: plans cached, function compiled.
    for (let i = 0; i < 50; i++) await call(c, targets, CALLS + i);
    const cpu0 = cpuMs(pid);
    const t0 = performance.now();
    for (let i = 0; i < CALLS; i++) await call(c, targets, i);
    return { wall: (performance.now() - t0) / CALLS, cpu: (cpuMs(pid) - cpu0) / CALLS };
  } finally {
    await c.end();
  }
}

const fmt = (xs: number[]) => xs.map((x) => x.toFixed(3)).join(", ");
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `load average at start ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ")}; ${CALLS} calls per round`,
);
const results = new Map<string, { cpu: number[]; wall: number[]; wallAsync: number[] }>();
for (let round = 0; round < ROUNDS; round++) {
  const names = Object.keys(calls);
  for (const name of round % 2 === 0 ? names : names.reverse()) {
    const r = results.get(name) ?? { cpu: [], wall: [], wallAsync: [] };
    const m = await measure(calls[name]!, true);
    const off = await measure(calls[name]!, false);
    r.cpu.push(m.cpu);
    r.wall.push(m.wall);
    r.wallAsync.push(off.wall);
    results.set(name, r);
    console.log(
      JSON.stringify({ round, name, cpu_ms: m.cpu, wall_ms: m.wall, wall_ms_sync_commit_off: off.wall }),
    );
  }
}
console.log(
  "\n| call | backend CPU ms/call (median; each round) | wall ms/call | wall ms/call, synchronous_commit off |\n|---|---|---|---|",
);
for (const [name, r] of results)
  console.log(
    `| ${name} | ${median(r.cpu).toFixed(3)} (${fmt(r.cpu)}) | ${median(r.wall).toFixed(3)} (${fmt(r.wall)}) | ${median(r.wallAsync).toFixed(3)} |`,
  );
console.log(
  `\nload average at end ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ")}`,
);
backends.stop();
process.exit(0);
