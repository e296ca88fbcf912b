import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "@agl/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { externalEngine } from "../engine/external-engine.js";
import { ReloadHookSync } from "../engine/reload-hook-sync.js";
import { updateWeightsFromDisk } from "../engine/update-weights-hook.js";
import { loadCheckpoint } from "../model/checkpoint.js";
import { PolicyServer } from "../server/policy-server.js";
import { VersionedEngine } from "../server/version-publication.js";
import type { ServeFn } from "./serving.js";
import { useCpuBackend } from "./test-support/tf-cpu.js";
import { tinyRun } from "./test-support/tiny-run.js";
import { weightsDigest } from "./test-support/weights-digest.js";

/**
 * PPO with a PolicyServer as its external engine, as when it runs in its own process: the engine holds its
 * own copy of the weights and gets every version over HTTP (`ReloadHookSync` writes a checkpoint,
 * `updateWeightsFromDisk` posts it to `POST /update_weights_from_disk`). Synchronously this trains
 * exactly what the in-process server trains; asynchronously (max_staleness 1) the engine switches
 * versions without a stop and every call records the engine version that served it.
 */

let root: string;
beforeAll(async () => {
  await useCpuBackend();
  root = mkdtempSync(join(tmpdir(), "agl-ppo-external-async-"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** An engine over its own copy of the initial weights, fed only through its HTTP route. */
function engineServe(name: string, versions: number[]): ServeFn {
  return async (policy, options) => {
    const engine = new VersionedEngine(policy.model.clone({ trainable: false }), policy.tokenizer);
    const server = new PolicyServer({
      model: engine.policy,
      tokenizer: policy.tokenizer,
      template: policy.template,
      generator: engine,
      modelName: "engine-model",
      apiKey: "engine-key",
      loadWeights: async (dir) => (await loadCheckpoint(dir)).model,
    });
    await server.start();
    const handle = await externalEngine({
      url: server.baseUrl,
      apiKey: "engine-key",
      weightSync: new ReloadHookSync({
        checkpointDir: join(root, name),
        servedModel: "engine-model",
        reload: async (info) => {
          const served = await updateWeightsFromDisk({ url: server.url, apiKey: "engine-key" })(info);
          versions.push(server.version);
          return served;
        },
      }),
    })(policy, options);
    return {
      ...handle,
      close: async () => {
        await handle.close();
        await server.stop();
        engine.dispose();
      },
    };
  };
}

describe("PPO with a PolicyServer as external engine (weights over HTTP)", () => {
  it("synchronous: trains exactly what the in-process server trains", async () => {
    const actor = { tis_imp_ratio_cap: 2 };
    const base = { steps: 3, logger: silentLogger, actor };
    const local = await tinyRun({ ...base, dir: join(root, "local") });
    const versions: number[] = [];
    const remote = await tinyRun({
      ...base,
      dir: join(root, "remote"),
      serve: engineServe("sync", versions),
    });
    expect(versions).toEqual([1, 2, 3]);
    expect(remote.result.stepsCompleted).toBe(3);
    expect(weightsDigest(remote.result.checkpointDir!)).toBe(weightsDigest(local.result.checkpointDir!));
  });

  it("max_staleness 1: versions switch without a stop; each call records the engine version that served it", async () => {
    const versions: number[] = [];
    const steps = 4;
    const { result, store } = await tinyRun({
      dir: join(root, "async"),
      steps,
      logger: silentLogger,
      actor: { tis_imp_ratio_cap: 2 },
      rollout: { max_staleness: 1 },
      runnerConcurrency: 8,
      serve: engineServe("async", versions),
      afterCall: () => new Promise((r) => setTimeout(r, 20)),
    });
    expect(result.stepsCompleted).toBe(steps);
    expect(versions).toEqual([1, 2, 3, 4]);
    const history = result.history.filter((h) => "training/n_rollouts" in h.metrics);
    for (const { metrics } of history) {
      expect(metrics["training/n_rollouts"]).toBe(4);
      expect(metrics["async/staleness/max"]).toBeLessThanOrEqual(1);
    }
    // Every training call's span carries the engine's version (from its header), one a step trained on.
    const train = (await store.queryRollouts({})).items.filter((r) =>
      String((r.metadata as { data_id?: string }).data_id).startsWith("train-"),
    );
    expect(train).toHaveLength(steps * 4);
    const served = new Set<unknown>();
    for (const r of train) {
      const spans = (await store.querySpans(r.rollout_id)).items.filter(
        (s) => s.attributes["agl.proxy.model_version"] !== undefined,
      );
      expect(spans.length).toBeGreaterThan(0);
      for (const s of spans) served.add(s.attributes["agl.proxy.model_version"]);
    }
    expect([...served].every((v) => typeof v === "number" && v >= 0 && v < steps)).toBe(true);
    expect(served.size).toBeGreaterThan(1);
  });
});
