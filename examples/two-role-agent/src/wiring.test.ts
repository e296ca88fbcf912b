import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore, type Span } from "@agl/core";
import { AdapterView, loadPretrainedPolicy, type PretrainedPolicy, selectBackend } from "@agl/trainer-gpu";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeTwoRoleCheckpoint } from "./checkpoint.js";
import { type Arm, addArmAdapters, trainArm } from "./experiment.js";
import { makeSplits } from "./task.js";

/**
 * The example's wiring, on a micro model of the example's own layout (fresh Qwen3 checkpoint, trimmed Qwen3
 * tokenizer) and two GRPO steps of 2 problems x 4 rollouts: every call of a role reaches the proxy under
 * the role's policy and runs on the role's adapter, and an update changes only the adapters of the roles
 * being trained, never the base.
 */

const MICRO = {
  hiddenSize: 16,
  intermediateSize: 32,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 8,
  maxPositionEmbeddings: 128,
};
let root: string;
let ckpt: string;
const train = makeSplits().train.slice(0, 4);

beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-two-role-"));
  ckpt = join(root, "init");
  await writeTwoRoleCheckpoint(ckpt, 3, MICRO);
});
afterAll(() => rm(root, { recursive: true, force: true }));

const snapshot = (vars: ReadonlyArray<{ dataSync(): ArrayLike<number> }>) =>
  vars.map((v) => Float32Array.from(v.dataSync()));
const moved = (a: Float32Array[], b: Float32Array[]) => a.some((v, i) => v.some((x, j) => x !== b[i]![j]));

/** Each LLM span's role (read from its prompt), the policy the proxy recorded and the model it ran on. */
async function calls(store: InMemoryLightningStore) {
  const out: Array<{ role: string; policy: unknown; model: unknown; asked: unknown }> = [];
  for (const r of (await store.queryRollouts()).items) {
    for (const s of (await store.querySpans(r.rollout_id)).items as Span[]) {
      const a = s.attributes ?? {};
      const prompt = a["gen_ai.prompt.0.content"];
      if (typeof prompt !== "string") continue;
      out.push({
        role: prompt.startsWith("Which is largest") ? "writer" : "checker",
        policy: a["agl.proxy.policy"],
        model: a["gen_ai.request.model"],
        asked: a["agl.proxy.client_model"] ?? a["gen_ai.request.model"],
      });
    }
  }
  return out;
}

async function run(arm: Arm, frozen: Array<"writer" | "checker">) {
  const policy: PretrainedPolicy = await loadPretrainedPolicy(ckpt);
  const models = addArmAdapters(policy, arm, 1);
  const adapters = [...new Set(Object.values(models))];
  const views = Object.fromEntries(
    adapters.map((a) => [a, new AdapterView(policy.model, a).trainableVariables]),
  );
  const before = Object.fromEntries(adapters.map((a) => [a, snapshot(views[a]!)]));
  const base = policy.model.weightNames.map((n) => policy.model.variable(n));
  const base0 = snapshot(base);
  const store = new InMemoryLightningStore();
  const { result } = await trainArm(policy, train, {
    arm,
    seed: 1,
    out: join(root, `${arm}-${frozen.join("-")}`),
    steps: 2,
    problemsPerStep: 2,
    rolloutsPerProblem: 4,
    frozen,
    store,
    // An untrained micro model is never right: rewards that vary within each group give every update a
    // gradient (what is tested here is where it goes, not what it teaches).
    mapRewards: (rewards) => rewards.map((_, i) => i % 2),
  });
  const changed = Object.fromEntries(adapters.map((a) => [a, moved(snapshot(views[a]!), before[a]!)]));
  const baseChanged = moved(snapshot(base), base0);
  const seen = await calls(store);
  policy.model.dispose();
  return { result, changed, baseChanged, seen };
}

describe("two-role example wiring", () => {
  it("an adapter per role: each role's calls run on its adapter, and only the trained role's adapter moves", async () => {
    const { result, changed, baseChanged, seen } = await run("per-role", ["checker"]);
    expect(result.stepsCompleted).toBe(2);
    // 2 steps x 8 rollouts, each a writer call, a checker call and maybe the writer's second answer.
    expect(seen.filter((c) => c.role === "checker")).toHaveLength(16);
    for (const c of seen) expect(c).toEqual({ role: c.role, policy: c.role, model: c.role, asked: c.role });
    expect(result.history.at(-1)!.metrics["policy/writer/n_rollouts"]).toBe(8);
    expect(changed).toEqual({ writer: true, checker: false });
    expect(baseChanged).toBe(false);
  });

  it("and the other way round: training only the checker moves only its adapter", async () => {
    const { changed, baseChanged } = await run("per-role", ["writer"]);
    expect(changed).toEqual({ writer: false, checker: true });
    expect(baseChanged).toBe(false);
  });

  it("one shared adapter: both roles run on it under their own policy names, and it is trained", async () => {
    const { result, changed, baseChanged, seen } = await run("shared", []);
    for (const c of seen) expect(c).toEqual({ role: c.role, policy: c.role, model: "shared", asked: c.role });
    const m = result.history.at(-1)!.metrics;
    expect(m["policy/writer/n_rollouts"]).toBe(8);
    expect(m["policy/checker/n_rollouts"]).toBe(8);
    expect(m["policy/writer+checker/agent_mode/n_sample_to_train"]).toBeGreaterThanOrEqual(16);
    expect(changed).toEqual({ shared: true });
    expect(baseChanged).toBe(false);
  });
});
