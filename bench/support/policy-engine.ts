/**
 * Start bench/support/policy-engine-process.ts (a PolicyServer in its own process) on a checkpoint folder
 * and wrap it as PPO's `serve`: `externalEngine` + `ReloadHookSync` writing each version to `workDir` +
 * `updateWeightsFromDisk` posting it to the engine, which switches between requests without a stop.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { externalEngine, ReloadHookSync, type ServeFn, updateWeightsFromDisk } from "@agl/trainer-gpu";
import { processCpuMs } from "./server-process.js";

export interface EngineProcess {
  serve: ServeFn;
  /** CPU time the engine process has used so far (ms). */
  cpuMs: () => number;
  stop: () => Promise<void>;
}

const here = dirname(fileURLToPath(import.meta.url));

export async function startEngineProcess(
  checkpointDir: string,
  workDir: string,
  modelName = "policy",
): Promise<EngineProcess> {
  const apiKey = randomBytes(16).toString("hex");
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(here, "policy-engine-process.ts"), checkpointDir, modelName],
    { stdio: ["pipe", "pipe", "inherit"], env: { ...process.env, AGL_ENGINE_API_KEY: apiKey } },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let buf = "";
    child.stdout.on("data", (chunk: Buffer) => {
      buf += chunk.toString();
      const line = buf.split("\n").find((l) => l.startsWith("http://"));
      if (line) resolve(line.trim());
    });
    child.once("exit", (code) => reject(new Error(`engine process exited with ${code}`)));
  });
  return {
    serve: externalEngine({
      url: `${url}/v1`,
      apiKey,
      weightSync: new ReloadHookSync({
        checkpointDir: join(workDir, "versions"),
        servedModel: modelName,
        reload: updateWeightsFromDisk({ url, apiKey }),
      }),
    }),
    cpuMs: () => processCpuMs(child.pid!),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.stdin.end();
        setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
      }),
  };
}
