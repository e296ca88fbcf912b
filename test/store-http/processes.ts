/** Child processes for the multi-process and durability tests, run from TypeScript sources with tsx. */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const STORE_CLI = "packages/store/src/cli.ts";
const WORKER_CLI = "packages/client/src/cli.ts";

export interface Child {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
}

/** `node --import tsx <script> ...args`, from the repo root so tsconfig paths map @agl/* to sources. */
export function spawnTs(script: string, args: string[], env: Record<string, string> = {}): Child {
  const proc = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: ROOT,
    env: { ...process.env, AGL_LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  proc.stdout!.on("data", (d) => (out += d));
  proc.stderr!.on("data", (d) => (err += d));
  const exited = once(proc, "exit").then(([code, signal]) => (code ?? signal) as number | string);
  return { proc, stdout: () => out, stderr: () => err, exited };
}

export function spawnWorker(
  storeUrl: string,
  agentModule: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Child {
  return spawnTs(
    WORKER_CLI,
    ["--store", storeUrl, "--agent", agentModule, "--log-level", "warn", ...args],
    env,
  );
}

/** Start `agl-store` and resolve with its URL once it logs that it is listening. */
export async function spawnStoreServer(args: string[]): Promise<Child & { url: string }> {
  const child = spawnTs(STORE_CLI, ["--port", "0", "--quiet", ...args]);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`store server did not start: ${child.stderr()}`)),
      30_000,
    );
    const onData = () => {
      const match = /"url":"(http:[^"]+)"/.exec(child.stderr());
      if (match) {
        clearTimeout(timer);
        child.proc.stderr!.off("data", onData);
        resolve(match[1]!);
      }
    };
    child.proc.stderr!.on("data", onData);
    child.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`store server exited (${code}): ${child.stderr()}`));
    });
  });
  return { ...child, url };
}
