/**
 * The three request types of the `rollout` scenario (start_rollout, add_span, update_attempt) as
 * separate phases over the same rollouts, each measured on its own: store server CPU and, on
 * PostgreSQL, database CPU per request, with 32 keep-alive connections per phase.
 */
import type { BenchBackends } from "./bench-backends.js";
import { Connection } from "./rollout-scenario.js";
import { startCliServer } from "./server-process.js";
import type { Build, PhaseRow } from "./store-rollout-report.js";

/** The three request types as separate phases over the same rollouts, each measured on its own. */
export async function phases(
  build: Build,
  backend: string,
  env: { backends: BenchBackends; rollouts: number; concurrency: number },
): Promise<PhaseRow[]> {
  const { backends, concurrency } = env;
  const rows: PhaseRow[] = [];
  const server = await startCliServer(build.root, await backends.uriFor(backend));
  try {
    const base = new URL(server.url);
    const n = Math.min(env.rollouts, 1024);
    const started: Array<{ rid: string; aid: string }> = [];
    const phase = async (
      name: string,
      requests: number,
      run: (conn: Connection, i: number) => Promise<void>,
    ) => {
      const before = await server.usage();
      const db0 = backends.databaseCpuMs();
      const conns = Array.from({ length: concurrency }, () => new Connection(base));
      let next = 0;
      await Promise.all(
        conns.map(async (conn) => {
          while (next < requests) await run(conn, next++);
        }),
      );
      for (const c of conns) c.close();
      const after = await server.usage();
      const db = backends.databaseCpuMs() - db0;
      rows.push({
        build: build.name,
        backend,
        phase: name,
        requests,
        server_cpu_ms_per_request: (after.cpu_ms - before.cpu_ms) / requests,
        db_cpu_ms_per_request: backend === "postgres" ? db / requests : 0,
      });
    };
    await phase("start_rollout (POST /rollouts)", n, async (conn, i) => {
      const r = JSON.parse(
        await conn.post(
          "/v1/agl/rollouts",
          JSON.stringify({
            input: { task: i },
            mode: null,
            resources_id: null,
            config: null,
            metadata: null,
            worker_id: null,
          }),
        ),
      );
      started[i] = { rid: r.rollout_id, aid: r.attempt.attempt_id };
    });
    await phase("add_span (POST /spans)", n * 4, async (conn, j) => {
      const { rid, aid } = started[j >> 2]!;
      const seq = j + 1;
      const hex = seq.toString(16);
      await conn.post(
        "/v1/agl/spans",
        JSON.stringify({
          rollout_id: rid,
          attempt_id: aid,
          sequence_id: seq,
          trace_id: hex.padStart(32, "0"),
          span_id: hex.padStart(16, "0"),
          parent_id: null,
          name: `micro-span-${(j & 3) + 1}`,
          status: { status_code: "OK", description: null },
          attributes: { key: "v".repeat(150) },
          events: [],
          links: [],
          start_time: null,
          end_time: null,
          context: {
            trace_id: hex.padStart(32, "0"),
            span_id: hex.padStart(16, "0"),
            is_remote: false,
            trace_state: {},
          },
          parent: null,
          resource: { attributes: {}, schema_url: "" },
        }),
      );
    });
    await phase("update_attempt (POST /rollouts/{rid}/attempts/{aid})", n, async (conn, i) => {
      const { rid, aid } = started[i]!;
      await conn.post(`/v1/agl/rollouts/${rid}/attempts/${aid}`, JSON.stringify({ status: "succeeded" }));
    });
    return rows;
  } finally {
    await server.stop();
  }
}
