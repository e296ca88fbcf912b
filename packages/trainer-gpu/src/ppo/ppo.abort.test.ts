import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "@agl/core";
import { DrainTimeoutError, type PauseState } from "@agl/proxy";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LATEST_FILE } from "./checkpoint.js";
import { pauseForUpdate } from "./run-support.js";
import { useCpuBackend } from "./test-support/tf-cpu.js";
import { stepStatuses, tinyRun } from "./test-support/tiny-run.js";

/**
 * Stopping a run: an abort (the Trainer's signal, or Ctrl-C to the process) while a step's rollouts are
 * being collected must cancel them, write a checkpoint of the last completed step and return promptly;
 * periodic checkpoints land every `save_freq` steps; a resume with a changed config says what changed.
 */

let root: string;
beforeAll(async () => {
  await useCpuBackend();
  root = mkdtempSync(join(tmpdir(), "agl-ppo-abort-"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  return {
    warnings,
    debug: () => {},
    info: () => {},
    error: () => {},
    warn: (m: string) => warnings.push(m),
  };
}

describe("PPO stop and checkpoints", () => {
  const dir = () => join(root, "ctx");

  it("aborting via the context signal mid-collection cancels the step, checkpoints, and stops promptly", async () => {
    const controller = new AbortController();
    let abortedAt = 0;
    const logger = recordingLogger();
    const { result, store } = await tinyRun({
      dir: dir(),
      steps: 8,
      saveFreq: 2,
      hangFromStep: 5,
      signal: controller.signal,
      logger,
      onHang: () => {
        abortedAt = performance.now();
        controller.abort();
      },
    });
    const stopSeconds = (performance.now() - abortedAt) / 1000;
    expect(abortedAt).toBeGreaterThan(0);
    expect(result.aborted).toBe(true);
    expect(result.stepsCompleted).toBe(4);
    expect(stopSeconds).toBeLessThan(5);
    // save_freq 2: steps 2 and 4 (the exit checkpoint is step 4 again), never 1 or 3
    for (const k of [2, 4])
      expect(existsSync(join(dir(), `global_step_${k}`, "trainer_state.json"))).toBe(true);
    for (const k of [1, 3, 5]) expect(existsSync(join(dir(), `global_step_${k}`))).toBe(false);
    expect(readFileSync(join(dir(), LATEST_FILE), "utf8")).toBe("4");
    expect(result.checkpointDir).toBe(join(dir(), "global_step_4"));
    // step 5's rollouts: the running ones and the queued ones are all cancelled
    const statuses = await stepStatuses(store, 5);
    expect(statuses).toHaveLength(4);
    expect(statuses.every((s) => s === "cancelled")).toBe(true);
    // every completed step logged the proxy pause metrics
    const step1 = result.history.find((h) => h.step === 1)!.metrics;
    expect(step1.proxy_inflight_at_pause).toBe(0);
    expect(step1.proxy_drain_seconds).toBeGreaterThanOrEqual(0);
  });

  it("resuming with a changed config warns naming the keys (and about ignored VERL keys), then continues", async () => {
    const logger = recordingLogger();
    const { result } = await tinyRun({
      dir: dir(),
      steps: 5,
      logger,
      actor: { optim: { lr: 5e-3 } },
      actorRolloutRef: { model: { path: "Qwen/Qwen2.5-0.5B" } },
    });
    expect(result.aborted).toBe(false);
    expect(result.stepsCompleted).toBe(5);
    expect(
      result.history.filter((h) => h.metrics["training/reward"] !== undefined).map((h) => h.step),
    ).toEqual([1, 2, 3, 4, 5]);
    const changed = logger.warnings.find((w) => /different config/.test(w));
    expect(changed).toBeDefined();
    expect(changed).toContain("actor_rollout_ref.actor.optim.lr");
    expect(changed).toContain("trainer.total_training_steps");
    expect(changed).not.toContain("trainer.seed");
    expect(logger.warnings.some((w) => /ignoring VERL config keys.*actor_rollout_ref\.model/.test(w))).toBe(
      true,
    );
  });

  it("Ctrl-C (SIGINT to the process) saves a checkpoint, cancels the step and exits cleanly", async () => {
    const out = join(root, "sigint");
    const script = fileURLToPath(new URL("./test-support/sigint-run.ts", import.meta.url));
    const repo = fileURLToPath(new URL("../../../../", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", script, out], {
      cwd: repo,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let sentAt = 0;
    child.stderr.on("data", (d) => {
      stderr += String(d);
    });
    child.stdout.on("data", (d) => {
      stdout += String(d);
      if (!sentAt && stdout.includes("HANG")) {
        sentAt = performance.now();
        child.kill("SIGINT");
      }
    });
    // "close", not "exit": the RESULT line may be read after "exit" fires.
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    expect(sentAt, stderr).toBeGreaterThan(0);
    expect((performance.now() - sentAt) / 1000).toBeLessThan(10);
    expect(code, stderr).toBe(0);
    const line = stdout.split("\n").find((l) => l.startsWith("RESULT "));
    const res = JSON.parse(line!.slice("RESULT ".length)) as {
      aborted: boolean;
      steps: number;
      checkpoint: string;
      statuses: string[];
    };
    expect(res.aborted).toBe(true);
    expect(res.steps).toBe(2);
    expect(res.checkpoint).toBe(join(out, "global_step_2"));
    expect(existsSync(join(out, "global_step_2", "actor", "policy.json"))).toBe(true);
    expect(res.statuses).toEqual(["cancelled", "cancelled", "cancelled", "cancelled"]);
  });
});

describe("proxy pause around an update", () => {
  const state = (inflight: number): PauseState => ({
    paused: false,
    mode: "reject",
    retry_after_seconds: 5,
    reason: null,
    inflight,
    held: 0,
    paused_at: null,
    model_version: null,
  });
  const quiet = { warn: () => {}, info: () => {} };

  it("drains and reports the calls in flight at the pause and the drain time", async () => {
    const calls: unknown[] = [];
    const proxy = {
      state: () => state(2),
      pause: async (o: unknown) => {
        calls.push(o);
        await new Promise((r) => setTimeout(r, 80));
        return state(0);
      },
    };
    const m = await pauseForUpdate(proxy, quiet);
    expect(calls).toEqual([{ drain: true, drainTimeoutMs: 60_000, reason: "weight update" }]);
    expect(m.proxy_inflight_at_pause).toBe(2);
    expect(m.proxy_drain_seconds).toBeGreaterThanOrEqual(0.07);
    expect(m.proxy_drain_seconds).toBeLessThan(1);
  });

  it("a drain timeout warns and lets the update go ahead; other errors propagate", async () => {
    const warnings: string[] = [];
    const timingOut = {
      state: () => state(1),
      pause: async () => {
        throw new DrainTimeoutError(1);
      },
    };
    const m = await pauseForUpdate(timingOut, { warn: (w) => warnings.push(w), info: () => {} }, 10);
    expect(m.proxy_inflight_at_pause).toBe(1);
    expect(warnings[0]).toMatch(/drain timed out with 1 call/);
    const broken = { state: () => state(0), pause: async () => Promise.reject(new Error("boom")) };
    await expect(pauseForUpdate(broken, quiet)).rejects.toThrow("boom");
  });
});
