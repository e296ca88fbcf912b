import { llm, promptTemplate, type RolloutContext, silentLogger, Trainer } from "@agl/core";
import type { MockReply } from "@agl/core/mock-llm";
import { afterEach, describe, expect, it } from "vitest";
import { APO, type ApoResult } from "./apo.js";
import { loadPromptHistory } from "./history.js";
import { APO_METADATA_KEY } from "./journal.js";
import { mockArithmeticTasks } from "./mock-optimizer/index.js";
import { arithmeticAgent, SEED_TEMPLATE, startMockWorld } from "./test-helpers.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

const never = () => new Promise<MockReply>(() => {});
const rateLimit: MockReply = {
  error: { status: 429, message: "slow down", headers: { "retry-after-ms": "1" } },
};
const serverError: MockReply = { error: { status: 500, message: "upstream exploded" } };

function trainerWith(
  baseURL: string,
  apo: APO,
  extra: Partial<ConstructorParameters<typeof Trainer>[0]> = {},
) {
  return new Trainer({
    logger: silentLogger,
    runnerConcurrency: 4,
    pollIntervalMs: 5,
    initialResources: {
      main_llm: llm({ endpoint: baseURL, model: "mock-model", api_key: "none" }),
      prompt_template: promptTemplate(SEED_TEMPLATE),
    },
    algorithm: apo,
    ...extra,
  });
}

describe("APO with a misbehaving optimiser", () => {
  it("logs, counts and records every failure, and the round still ends with a new version", async () => {
    // HTTP attempts of each role, numbered from 1; steps run one at a time, so the numbering is fixed.
    const gradient: Record<number, () => MockReply | Promise<MockReply>> = {
      1: () => rateLimit, // step 1: rate-limited on the call and its retry
      2: () => rateLimit,
      3: never, // step 2: the critique times out, twice
      4: never,
      5: () => rateLimit, // step 3: rate-limited once, then fine
      7: () => ({ content: "   " }), // step 4: an empty critique
    };
    const edit: Record<number, () => MockReply> = {
      1: () => ({ content: null }), // step 3: no prompt at all
      2: () => ({ content: `<prompt>{question}${" Be precise.".repeat(2000)}</prompt>` }), // step 5: huge
      3: () => ({ content: "<prompt>Reply with only the number.</prompt>" }), // step 6: dropped {question}
      4: () => ({ content: "<prompt>Hi {user}! Reply with only the number.\n{question}</prompt>" }), // step 7
      5: () => serverError, // step 8: a server error on the call and its retry
      6: () => serverError,
    };
    const { server } = await startMockWorld(({ role, n }) =>
      (role === "gradient" ? gradient[n] : edit[n])?.(),
    );
    closers.push(() => server.close());
    const apo = new APO({
      baseURL: server.baseURL,
      gradientModel: "mock-critic",
      applyEditModel: "mock-editor",
      gradientBatchSize: 4,
      valBatchSize: 4,
      beamWidth: 1,
      branchFactor: 9,
      beamRounds: 1,
      parallelSteps: 1,
      maxRetries: 1,
      callTimeoutMs: 1500,
      pollIntervalMs: 50,
      diversityTemperature: 0,
    });
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (message: string) => warnings.push(message) };
    const trainer = trainerWith(server.baseURL, apo, { logger });
    const { result } = await trainer.fit<unknown, ApoResult>(arithmeticAgent, mockArithmeticTasks(4), {
      valDataset: mockArithmeticTasks(4, 50),
    });

    expect(result.problems).toEqual({
      rate_limited: 3,
      rate_limit_exhausted: 1,
      timeout: 1,
      no_prompt: 1,
      no_critique: 1,
      huge_prompt: 1,
      missing_variables: 1,
      unknown_variables: 1,
      server_error: 2,
      api_error: 1,
    });
    expect(result.rounds).toHaveLength(1);
    expect(result.rounds[0]!.candidates).toEqual(["v1"]);
    expect(result.rounds[0]!.optimizerCalls).toBe(9 + 6); // every step critiques; six got as far as an edit
    expect(result.best.score).toBeGreaterThan(0);

    const history = (await loadPromptHistory(trainer.store))!;
    expect(history.versions.map((v) => v.version)).toEqual(["v0", "v1"]);
    expect(history.rejected.map((r) => r.reason)).toEqual([
      "rate_limit_exhausted",
      "timeout",
      "no_prompt",
      "no_critique",
      "huge_prompt",
      "missing_variables",
      "unknown_variables",
      "api_error",
    ]);
    expect(history.problems).toEqual(result.problems);
    // Each failure was logged where it happened, naming the step.
    expect(warnings.filter((w) => /^apo: round 1 v0 branch \d: no candidate/.test(w))).toHaveLength(8);
    expect(warnings.some((w) => /gradient call to mock-critic failed \(timeout\)/.test(w))).toBe(true);
    expect(warnings.some((w) => /missing_variables: dropped \{question\}/.test(w))).toBe(true);

    // A rejected step is a failed rollout whose attempt says why, with the calls it made as spans.
    const steps = (await trainer.store.queryRollouts({ limit: -1 })).items.filter(
      (r) => r.metadata?.[APO_METADATA_KEY]?.kind === "rejected",
    );
    expect(steps).toHaveLength(8);
    const timedOut = steps.find((r) => r.metadata![APO_METADATA_KEY].reason === "timeout")!;
    expect(timedOut.status).toBe("failed");
    const attempt = await trainer.store.getLatestAttempt(timedOut.rollout_id);
    expect(attempt!.metadata!.error.message).toMatch(/^timeout: /);
    const spans = (await trainer.store.querySpans(timedOut.rollout_id)).items;
    expect(spans).toHaveLength(1);
    expect(spans[0]!.status.status_code).toBe("ERROR");
  });

  it("scores rollouts unfinished at the batch timeout as 0 and cancels them", async () => {
    const { server } = await startMockWorld();
    closers.push(() => server.close());
    const tasks = mockArithmeticTasks(4);
    const stuck = tasks[1]!.question;
    const agent = async (task: (typeof tasks)[number], context: RolloutContext) => {
      if (task.question === stuck) {
        await new Promise((resolve) => context.signal.addEventListener("abort", resolve, { once: true }));
        return 1;
      }
      return arithmeticAgent.trainingRollout(task, context);
    };
    const apo = new APO({
      baseURL: server.baseURL,
      beamRounds: 0,
      rolloutBatchTimeoutSeconds: 3,
      pollIntervalMs: 50,
    });
    const trainer = trainerWith(server.baseURL, apo, { gracePeriodMs: 50 });
    const { result } = await trainer.fit<unknown, ApoResult>(agent, tasks, { valDataset: tasks });
    expect(result.problems).toEqual({ rollout_timeout: 1 });
    expect(result.initialScore).toBe(0);
    const rollouts = (await trainer.store.queryRollouts({ limit: -1 })).items;
    const cancelled = rollouts.filter((r) => r.status === "cancelled");
    expect(cancelled.map((r) => r.input.question)).toEqual([stuck]);
  });

  it("returns the best so far when the Trainer is stopped mid-round", async () => {
    const controller = new AbortController();
    // Stop while the first critique is in flight.
    const { server } = await startMockWorld(({ role }) => {
      if (role === "gradient") controller.abort();
      return undefined;
    });
    closers.push(() => server.close());
    const apo = new APO({ baseURL: server.baseURL, gradientModel: "mock-critic", pollIntervalMs: 50 });
    const trainer = trainerWith(server.baseURL, apo, { gracePeriodMs: 50 });
    const tasks = mockArithmeticTasks(4);
    const { result } = await trainer.fit<unknown, ApoResult>(arithmeticAgent, tasks, {
      valDataset: tasks,
      signal: controller.signal,
    });
    expect(result.stopped).toBe(true);
    expect(result.rounds).toEqual([]);
    expect(result.best).toMatchObject({ version: "v0", score: 0 });
    expect(apo.bestPrompt().template).toBe(SEED_TEMPLATE);
    // The interrupted step is closed, not left running.
    const steps = (await trainer.store.queryRollouts({ limit: -1 })).items.filter(
      (r) => r.metadata?.[APO_METADATA_KEY]?.kind === "step",
    );
    expect(steps.length).toBeGreaterThan(0);
    for (const step of steps) expect(step.status).toBe("failed");
  });

  it("rejects bad set-ups with errors that name the field", async () => {
    const apo = new APO({ beamRounds: 0 });
    const trainer = new Trainer({ logger: silentLogger, algorithm: apo, initialResources: {} });
    await expect(trainer.fit(async () => 1, [1], { valDataset: [1] })).rejects.toThrow(
      /initialResources.*prompt_template/,
    );
    const withBadSeed = new Trainer({
      logger: silentLogger,
      algorithm: new APO({ beamRounds: 0 }),
      initialResources: { p: promptTemplate("Answer {question} like {json: 1}") },
    });
    await expect(withBadSeed.fit(async () => 1, [1], { valDataset: [1] })).rejects.toThrow(
      /initialResources\.p\.template/,
    );
    const noVal = new Trainer({
      logger: silentLogger,
      algorithm: new APO({ beamRounds: 0 }),
      initialResources: { p: promptTemplate("{question}") },
    });
    await expect(noVal.fit(async () => 1, [1])).rejects.toThrow(/valDataset/);
    expect(() => new APO({ beamWidth: 0 })).toThrow(/apo\.beamWidth/);
    expect(() => new APO({ beamWidht: 2 } as never)).toThrow(/unknown option "beamWidht"/);
    expect(() => new APO({ baseURL: "not a url" })).toThrow(/apo\.baseURL/);
  });
});
