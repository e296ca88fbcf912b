/**
 * PostgreSQL for tests and benchmarks. `getTestPostgresUrl()` returns `AGL_TEST_PG_URL` when set (CI
 * starts a server with test/support/start-postgres.sh), else starts ONE throwaway PostgreSQL 15
 * cluster for this process (as the `postgres` user when running as root, since initdb refuses root),
 * on a free port with its data in a temporary directory, and stops it when the process exits.
 * `createTestDatabase()` gives each caller a fresh database on that server.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort } from "./free-port.js";

const PG_BIN = process.env.PG_BIN ?? "/usr/lib/postgresql/15/bin";

export interface StartOptions {
  /** Keep fsync and synchronous commits on (benchmarks); tests turn them off for speed. */
  durable?: boolean;
  /** Extra server settings (`name=value`), e.g. shared_preload_libraries=pg_stat_statements for profiling. */
  settings?: readonly string[];
}

let started: Promise<string> | null = null;

export { freePort };

const isRootUser = (): boolean => process.getuid?.() === 0;

/** Run a PostgreSQL binary, as `postgres` when we are root. */
function runPg(binary: string, args: string[]): void {
  const isRoot = process.getuid?.() === 0;
  const [cmd, argv] = isRoot
    ? ["runuser", ["-u", "postgres", "--", join(PG_BIN, binary), ...args]]
    : [join(PG_BIN, binary), args];
  execFileSync(cmd, argv, { stdio: ["ignore", "ignore", "pipe"] });
}

/** Start a throwaway cluster and return its URL; it is stopped and deleted when the process exits. */
export async function startPostgresCluster(
  options: StartOptions = {},
): Promise<{ url: string; stop: () => void; dataDir: string }> {
  const dir = mkdtempSync(join(tmpdir(), "agl-pg-"));
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, "data");
  runPg("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const port = await freePort();
  const settings = [
    "-c listen_addresses=127.0.0.1",
    `-c port=${port}`,
    `-c unix_socket_directories=${dir}`,
    "-c max_connections=200",
    ...(options.durable ? [] : ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]),
    ...(options.settings ?? []).map((s) => `-c ${s}`),
  ].join(" ");
  runPg("pg_ctl", ["-D", data, "-l", join(dir, "log"), "-w", "-o", settings, "start"]);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    const isRoot = process.getuid?.() === 0;
    const args = ["-D", data, "-m", "immediate", "-w", "stop"];
    if (isRoot)
      spawnSync("runuser", ["-u", "postgres", "--", join(PG_BIN, "pg_ctl"), ...args], { stdio: "ignore" });
    else spawnSync(join(PG_BIN, "pg_ctl"), args, { stdio: "ignore" });
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", stop);
  // Test runners often end worker processes with a signal, which skips "exit" handlers: a detached
  // watcher stops the cluster once this process is gone, however it died.
  const pgCtl = `${isRootUser() ? "runuser -u postgres -- " : ""}${join(PG_BIN, "pg_ctl")}`;
  const reaper = spawn(
    "sh",
    [
      "-c",
      `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${pgCtl} -D "${data}" -m immediate -w stop >/dev/null 2>&1; rm -rf "${dir}"`,
    ],
    { detached: true, stdio: "ignore" },
  );
  reaper.unref();
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop, dataDir: data };
}

/** The server tests use: AGL_TEST_PG_URL, or one cluster started for this process. */
export function getTestPostgresUrl(): Promise<string> {
  const fromEnv = process.env.AGL_TEST_PG_URL;
  if (fromEnv) return Promise.resolve(fromEnv);
  started ??= startPostgresCluster().then((c) => c.url);
  return started;
}

let counter = 0;

/** A fresh, empty database on the test server; `drop()` removes it. */
export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const baseUrl = await getTestPostgresUrl();
  const name = `agl_test_${process.pid}_${Date.now().toString(36)}_${counter++}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: baseUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
