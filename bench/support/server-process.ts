/**
 * bench/support/http-server.ts in a child process (so client and server each get a core), with a
 * way to read the CPU time it has used and the store requests it has served.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Connection } from "./rollout-scenario.js";

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  stop: () => Promise<void>;
  /** CPU time the server process has used so far (ms) and the requests it has served. */
  usage: () => Promise<{ cpu_ms: number; requests: number }>;
}

/**
 * Start `http-server.ts <args>` from the checkout at `root`. `storeEntry` (another build's
 * packages/store/dist/index.js) makes it serve that build; extra node flags (e.g. --cpu-prof) go first.
 */
export async function startServerProcess(
  root: string,
  args: string[],
  storeEntry?: string,
  nodeArgs: string[] = nodeArgsFromEnv(),
): Promise<ServerProcess> {
  const child = spawn(
    process.execPath,
    [...nodeArgs, "--import", "tsx", join(root, "bench/support/http-server.ts"), ...args],
    {
      cwd: root,
      stdio: ["pipe", "pipe", "inherit"],
      env: storeEntry ? { ...process.env, AGL_STORE_ENTRY: storeEntry } : process.env,
    },
  );
  let out = "";
  const cpuWaiters: Array<(usage: { cpu_ms: number; requests: number }) => void> = [];
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      let nl = out.indexOf("\n");
      while (nl >= 0) {
        const line = out.slice(0, nl).trim();
        out = out.slice(nl + 1);
        if (line.startsWith("http://")) resolve(line);
        else if (line.startsWith("{")) cpuWaiters.shift()?.(JSON.parse(line));
        nl = out.indexOf("\n");
      }
    });
    child.once("exit", (code) => reject(new Error(`server process exited with ${code}`)));
  });
  const usage = () =>
    new Promise<{ cpu_ms: number; requests: number }>((resolve) => {
      cpuWaiters.push(resolve);
      child.stdin!.write("cpu\n");
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.stdin!.end();
      setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
    });
  return { url, child, stop, usage };
}

/** CPU ms a process has used so far (utime + stime from /proc; Linux). */
export function processCpuMs(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
}
const CLK_TCK = 100;

/**
 * The `agl-store` CLI of the checkout at `root` (its built dist/cli.js), as users run it: default
 * flags and log level (stderr is read for the listening line and errors). CPU from /proc; `requests`
 * counts the answers the bench's own connections received (bench/support/rollout-scenario.ts), as
 * servers log each request only at debug now.
 */
export async function startCliServer(root: string, db: string): Promise<ServerProcess> {
  const child = spawn(
    process.execPath,
    [...nodeArgsFromEnv(), join(root, "packages/store/dist/cli.js"), "--db", db, "--port", "0"],
    { cwd: root, stdio: ["ignore", "ignore", "pipe"] },
  );
  let pending = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) {
        if (line.includes("store server listening")) resolve(JSON.parse(line).url);
        else if (line.includes('"level":50') || line.includes('"level":"error"')) console.error(line);
      }
    });
    child.once("exit", (code) => reject(new Error(`agl-store exited with ${code}`)));
  });
  const pid = child.pid!;
  return {
    url,
    child,
    usage: async () => ({ cpu_ms: processCpuMs(pid), requests: Connection.answered }),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
        setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
      }),
  };
}

function nodeArgsFromEnv(): string[] {
  return (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter(Boolean);
}
