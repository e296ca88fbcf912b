/** Spawning test/support/store-process.ts children and talking to them over stdio. */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SCRIPT = fileURLToPath(new URL("./store-process.ts", import.meta.url));

export interface StoreProcess {
  child: ChildProcess;
  ready: Promise<void>;
  /** Resolves with the JSON line the child prints last, once it exits with code 0. */
  result: Promise<unknown>;
}

export function spawnStoreProcess(
  mode: "claim" | "watchdog",
  uri: string,
  env: Record<string, string> = {},
): StoreProcess {
  const child = spawn(process.execPath, ["--import", "tsx", SCRIPT, mode, uri], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.stdout!.on("data", (chunk: Buffer) => {
    out += chunk.toString();
    if (out.includes("ready\n")) markReady();
  });
  child.stderr!.on("data", (chunk: Buffer) => {
    err += chunk.toString();
  });
  const result = new Promise<unknown>((resolve, reject) => {
    // "close", not "exit": the last stdout chunk (the result line) may be read after "exit".
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`store process exited with ${code}: ${err}`));
      const lines = out.trim().split("\n");
      resolve(JSON.parse(lines[lines.length - 1]!));
    });
  });
  // Surface an early crash instead of waiting for "ready" forever.
  const readyOrCrash = Promise.race([ready, result.then(() => {})]);
  return { child, ready: readyOrCrash, result };
}
