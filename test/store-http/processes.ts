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
  /** Resolves with the exit code (or the signal name) once the process exited and its output was read. */
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
  // "close", not "exit": "exit" may fire before the last stderr/stdout chunks are read, and tests read
  // the whole output once the process has exited.
  const exited = once(proc, "close").then(([code, signal]) => (code ?? signal) as number | string);
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

/**
 * Resolve once the child's stderr matches `pattern` (an event, not a time: a loaded machine may take many
 * seconds to start a tsx process); reject if it exits first or after `timeoutMs` as a safety net.
 */
export function waitForStderr(child: Child, pattern: RegExp, timeoutMs = 120_000): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const check = () => {
      const match = pattern.exec(child.stderr());
      if (!match) return false;
      cleanup();
      resolve(match[0]);
      return true;
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no ${pattern} on stderr within ${timeoutMs} ms: ${child.stderr()}`));
    }, timeoutMs);
    const onExit = () => {
      if (check()) return;
      cleanup();
      reject(new Error(`exited before printing ${pattern}: ${child.stderr()}`));
    };
    const cleanup = () => {
      clearTimeout(timer);
      child.proc.stderr!.off("data", check);
      child.proc.off("exit", onExit);
    };
    child.proc.stderr!.on("data", check);
    child.proc.once("exit", onExit);
    check();
  });
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
