/**
 * The store's single-span write on PostgreSQL in process, for a CPU profile of the store layer
 * (`node --cpu-prof --import tsx bench/store-pg-loop.ts`): BENCH_CALLS calls of
 * addManySpansAssigningSequences with one span (as the OTLP route makes them for a Python runner with
 * OtelTracer), 200 per rollout, on a durable cluster (fsync and synchronous commit on), over TCP
 * loopback and over the cluster's Unix-domain socket in turn. Prints wall time and this process's CPU per call.
 *
 *   pnpm exec tsx bench/store-pg-loop.ts   (env: BENCH_CALLS=3000, BENCH_ROUNDS=2)
 */
import { loadavg } from "node:os";
import { dirname } from "node:path";
import pg from "pg";
import { PostgresLightningStore } from "../packages/store/src/postgres/postgres-store.js";
import { startPostgresCluster } from "../test/support/postgres.js";
import { benchSpan } from "./store-pg-span.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const cluster = await startPostgresCluster({ durable: true });
const port = new URL(cluster.url).port;
const urls = {
  tcp: (db: string) => `postgres://postgres@127.0.0.1:${port}/${db}`,
  socket: (db: string) =>
    `postgres://postgres@localhost:${port}/${db}?host=${encodeURIComponent(dirname(cluster.dataDir))}`,
};

let databases = 0;
async function loop(connection: keyof typeof urls): Promise<void> {
  const db = `loop_${databases++}`;
  const admin = new pg.Client({ connectionString: cluster.url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${db}`);
  await admin.end();
  const store = await PostgresLightningStore.connect(urls[connection](db), {
    listen: false,
    watchdog: false,
  });
  let target = { rid: "", aid: "" };
  const call = async (i: number) => {
    if (i % 200 === 0) {
      const r = await store.startRollout({ input: i });
      target = { rid: r.rollout_id, aid: r.attempt.attempt_id };
    }
    const span = benchSpan(target.rid, target.aid, `s${i}`.padStart(16, "0"), 150);
    const stored = await store.addManySpansAssigningSequences([span], [true]);
    if (stored.length !== 1) throw new Error("not stored");
  };
  for (let i = 0; i < 200; i++) await call(i);
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (let i = 200; i < CALLS + 200; i++) await call(i);
  const c = process.cpuUsage(c0);
  await store.close();
  console.log(
    JSON.stringify({
      connection,
      wall_ms: (performance.now() - t0) / CALLS,
      node_cpu_ms: (c.user + c.system) / 1000 / CALLS,
      load: loadavg()[0],
    }),
  );
}

try {
  for (let round = 0; round < ROUNDS; round++)
    for (const connection of round % 2 === 0 ? (["tcp", "socket"] as const) : (["socket", "tcp"] as const))
      await loop(connection);
} finally {
  cluster.stop();
}
process.exit(0);
