import { TraceToMessages } from "@agl/adapter";
import { llm, promptTemplate, silentLogger, Trainer } from "@agl/core";
import { afterEach, describe, expect, it } from "vitest";
import { APO, type ApoResult } from "./apo.js";
import { bestPrompt, formatPromptHistory, loadPromptHistory } from "./history.js";
import { APO_METADATA_KEY } from "./journal.js";
import { FIXES, mockArithmeticTasks } from "./mock-optimizer/index.js";
import { arithmeticAgent, SEED_TEMPLATE, startMockWorld } from "./test-helpers.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

describe("APO end to end (scripted optimiser, prompt-sensitive agent)", () => {
  it("raises validation reward from the seed to the best reachable prompt, through faults", async () => {
    // The optimiser misbehaves now and then: a rate limit (retried by the SDK), an empty edit.
    const { server } = await startMockWorld(({ role, n }) => {
      if (role === "gradient" && n === 1)
        return { error: { status: 429, message: "rate limited", headers: { "retry-after-ms": "1" } } };
      if (role === "edit" && n === 2) return { content: "" };
      return undefined;
    });
    closers.push(() => server.close());
    let apo: APO;
    const trainer = new Trainer({
      logger: silentLogger,
      nRunners: 2,
      runnerConcurrency: 4,
      pollIntervalMs: 5,
      initialResources: {
        main_llm: llm({ endpoint: server.baseURL, model: "mock-model", api_key: "none" }),
        prompt_template: promptTemplate(SEED_TEMPLATE),
      },
      algorithm: (apo = new APO({
        baseURL: server.baseURL,
        apiKey: "none",
        gradientModel: "mock-critic",
        applyEditModel: "mock-editor",
        // Every critique sees one task of each kind, so the only randomness left is which wording is used.
        gradientBatchSize: 4,
        valBatchSize: 8,
        beamWidth: 2,
        branchFactor: 2,
        beamRounds: 3,
        maxRetries: 2,
        pollIntervalMs: 50,
      })),
    });
    const train = mockArithmeticTasks(4);
    const val = mockArithmeticTasks(8, 100);
    const { result } = await trainer.fit<unknown, ApoResult>(arithmeticAgent, train, { valDataset: val });

    expect(result.initialScore).toBe(0);
    expect(result.best.score).toBe(1);
    for (const fix of Object.values(FIXES)) expect(result.best.template.template).toContain(fix);
    expect(result.best.template.template).toContain("{question}");
    expect(apo!.bestPrompt()).toEqual(result.best.template);
    expect(result.rounds).toHaveLength(3);
    expect(result.stopped).toBe(false);
    expect(result.problems.rate_limited).toBe(1);
    expect(result.problems.empty_prompt).toBe(1);
    // Four steps a round, two calls each, minus the edit a failed critique never asked for (none here).
    for (const round of result.rounds) expect(round.optimizerCalls).toBe(8);
    const leaders = result.rounds.map((r) => r.leader.score);
    expect(leaders.at(-1)).toBe(1);

    // The store holds every version, its scores, the run record, and the optimiser's calls as spans.
    const store = trainer.store;
    const history = await loadPromptHistory(store);
    expect(history).not.toBeNull();
    expect(history!.completedRounds).toBe(3);
    expect(history!.versions[0]!.version).toBe("v0");
    expect(history!.versions[0]!.scores[0]).toMatchObject({ round: 0, split: "val_full", score: 0 });
    expect(history!.best).toEqual({ version: result.best.version, score: 1 });
    expect(history!.rejected.map((r) => r.reason)).toContain("empty_prompt");
    const best = await bestPrompt(store);
    expect(best!.template.template).toBe(result.best.template.template);
    const resources = await store.getResourcesById(best!.resourcesId);
    expect(resources!.resources.main_llm).toMatchObject({ model: "mock-model" });
    expect(resources!.resources.prompt_template).toMatchObject({ template: result.best.template.template });

    const made = history!.versions.find((v) => v.version !== "v0")!;
    const spans = (await store.querySpans(made.rolloutId)).items;
    const models = spans.map((s) => s.attributes["gen_ai.request.model"]).sort();
    expect(models).toEqual(["mock-critic", "mock-editor"]);
    // Readable like any agent's calls: the edit request carries the critique the version came from.
    const calls = new TraceToMessages().adapt(spans);
    expect(calls).toHaveLength(2);
    const editCall = calls.find((c) => JSON.stringify(c.messages).includes("<prompt>"))!;
    expect(String(editCall.messages[1]!.content)).toContain(made.critique!.slice(0, 60));
    expect(String(editCall.messages.at(-1)!.content)).toContain(made.template.template);
    const rollout = await store.getRolloutById(made.rolloutId);
    expect(rollout!.status).toBe("succeeded");
    expect(rollout!.metadata![APO_METADATA_KEY]).toMatchObject({ kind: "version", version: made.version });

    const printed = formatPromptHistory(history!);
    expect(printed).toContain(`=== ${made.version} (from ${made.parent})`);
    expect(printed).toMatch(/^\+.*(only the number|operator precedence|without commas)/m);
  });
});
