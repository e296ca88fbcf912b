/**
 * Pipelined vs one-at-a-time pool connections for the PostgreSQL store, in one process: the same
 * store code on a pool created with `pipeline: true` (what openMigratedPool sets) and with
 * `pipeline: false` (the pg default: BEGIN and COMMIT each wait for their own answer), alternating
 * round by round on one durable cluster (fsync and synchronous commit on). Each call: start_rollout,
 * then update_attempt succeeded, one after another (each a transaction of its own). Prints this
 * process's CPU and wall time per call; the first round of each is JIT warm-up.
 *
 *   pnpm exec tsx bench/store-pg-pipeline.ts   (env: BENCH_CALLS=800, BENCH_ROUNDS=6)
 */
import { loadavg } from "node:os";
import pg from "pg";
import { PostgresLightningStore } from "../packages/store/src/postgres/postgres-store.js";
import { startPostgresCluster } from "../test/support/postgres.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 800);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const cluster = await startPostgresCluster({ durable: true });

// The store builds its pool with `new pg.Pool(...)`: this subclass overrides the pipeline setting.
let pipelineFlag = true;
const OriginalPool = pg.Pool;
(pg as { Pool: unknown }).Pool = class extends OriginalPool {
  constructor(options: pg.PoolConfig) {
    super({ ...options, pipeline: pipelineFlag } as pg.PoolConfig);
  }
};

let databases = 0;
try {
  for (let round = 0; round < ROUNDS; round++)
    for (const pipeline of round % 2 === 0 ? [false, true] : [true, false]) {
      pipelineFlag = pipeline;
      const name = `pipe_${databases++}`;
      const admin = new pg.Client({ connectionString: cluster.url });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name}`);
      await admin.end();
      const store = await PostgresLightningStore.connect(cluster.url.replace(/\/postgres$/, `/${name}`), {
        listen: false,
        watchdog: false,
      });
      const pool = (store as unknown as { pool: { options: { pipeline?: boolean } } }).pool;
      if ((pool.options.pipeline ?? false) !== pipeline) throw new Error("the pool ignored the setting");
      const call = async () => {
        const r = await store.startRollout({ input: 1 });
        await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
      };
      for (let i = 0; i < 50; i++) await call();
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < CALLS; i++) await call();
      const c = process.cpuUsage(c0);
      console.log(
        JSON.stringify({
          round,
          pipeline,
          node_cpu_us: Math.round((c.user + c.system) / CALLS),
          wall_us: Math.round(((performance.now() - t0) * 1000) / CALLS),
          load1: loadavg()[0],
        }),
      );
      await store.close();
    }
} finally {
  cluster.stop();
}
process.exit(0);
