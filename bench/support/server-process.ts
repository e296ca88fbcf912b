/**
 * bench/support/http-server.ts in a child process (so client and server each get a core), with a
 * way to read the CPU time it has used and the store requests it has served.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";

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
  nodeArgs: string[] = (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter(Boolean),
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
