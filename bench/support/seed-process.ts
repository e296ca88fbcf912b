/**
 * Runs one seed of a multi-seed bench in its own process (`pnpm exec tsx <script> --seed N --out DIR ...`):
 * its output goes to the bench's log (minus per-step PPO lines, which stay in each run's metrics.jsonl),
 * its `[seed ...]` milestones to the console, and its result is `<out>/result.json`.
 */
import { spawn } from "node:child_process";
import { readFileSync, type WriteStream } from "node:fs";
import { join } from "node:path";

export interface SeedProcess {
  script: string;
  seed: number;
  out: string;
  args?: string[];
  logFile: WriteStream | null;
}

export function runSeedProcess<T>({ script, seed, out, args = [], logFile }: SeedProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn("pnpm", ["exec", "tsx", script, "--seed", String(seed), "--out", out, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    for (const stream of [child.stdout, child.stderr]) {
      stream.on("data", (chunk: Buffer) => {
        for (const line of chunk.toString().split("\n")) {
          if (!line.trim() || line.startsWith("[ppo] step")) continue;
          logFile?.write(`${line}\n`);
          if (line.startsWith("[seed")) console.log(line);
        }
      });
    }
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code !== 0) reject(new Error(`seed ${seed} exited with ${code}`));
      else resolve(JSON.parse(readFileSync(join(out, "result.json"), "utf8")) as T);
    });
  });
}
