/**
 * The backends of the store benchmarks: a fresh store URI per run (memory, a SQLite file, a database
 * of its own on one durable PostgreSQL cluster: fsync and synchronous commit on), and the CPU time of
 * every process of that cluster, so work moved into the database is counted.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startPostgresCluster } from "../../test/support/postgres.js";

export interface BenchBackends {
  /** A store URI no run has used: "memory:", a new SQLite file, or a new PostgreSQL database. */
  uriFor(backend: string): Promise<string>;
  /** CPU ms of every process of the PostgreSQL cluster so far: the postmaster, its children, and children reaped. */
  databaseCpuMs(): number;
  stop(): void;
}

const CLK_TCK = 100;

export async function startBenchBackends(): Promise<BenchBackends> {
  const tmp = mkdtempSync(join(tmpdir(), "agl-bench-rollout-"));
  const cluster = await startPostgresCluster({ durable: true });
  const postmasterPid = Number(readFileSync(join(cluster.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  let dbCounter = 0;

  const databaseCpuMs = (): number => clusterCpuMs(postmasterPid);

  const uriFor = async (backend: string): Promise<string> => {
    if (backend === "memory") return "memory:";
    if (backend === "sqlite") return `sqlite:${join(tmp, `rollout-${dbCounter++}.db`)}`;
    const pg = (await import("pg")).default;
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    const name = `rollout_${dbCounter++}`;
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = new URL(cluster.url);
    url.pathname = `/${name}`;
    return url.toString();
  };

  return {
    uriFor,
    databaseCpuMs,
    stop: () => {
      cluster.stop();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/** CPU ms of a PostgreSQL cluster so far: the postmaster (with its reaped children) and its live children. */
export function clusterCpuMs(postmasterPid: number): number {
  const stat = (pid: string) => {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  };
  // Fields after the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
  const main = stat(String(postmasterPid));
  let ticks = Number(main[11]) + Number(main[12]) + Number(main[13]) + Number(main[14]);
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const f = stat(pid);
      if (Number(f[1]) === postmasterPid) ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return (ticks * 1000) / CLK_TCK;
}
