/**
 * The dashboard's data shaping on spans from a real agent run through the LLM proxy (mock LLM): what
 * the detail page will show must match what the engine produced, token for token.
 */
import { InMemoryLightningStore } from "@agl/core";
import { mockEncode } from "@agl/core/mock-llm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { analyzeRollout, messageDisplay, messageText } from "../../packages/dashboard/src/view/llm-calls.js";
import { buildSpanTimeline } from "../../packages/dashboard/src/view/span-tree.js";
import { sequenceTokens, tripletTokens } from "../../packages/dashboard/src/view/tokens.js";
import { CHAT_QUESTION, REACT_OBSERVATION, REACT_PROMPT, SEED_TASKS, seedStore } from "./seed.js";

const store = new InMemoryLightningStore({ watchdog: false });
const spansOf = async (task: (typeof SEED_TASKS)[number]) => {
  const rollouts = (await store.queryRollouts({})).items.filter(
    (r) => (r.input as { a?: number }).a === task.a && (r.input as { style?: string }).style === task.style,
  );
  expect(rollouts).toHaveLength(1);
  return (await store.querySpans(rollouts[0]!.rollout_id, { attemptId: "latest" })).items;
};

beforeAll(async () => {
  await seedStore(store, { queued: 0 });
});
afterAll(() => store.close());

describe("real spans → dashboard views", () => {
  it("a chat rollout: two calls with messages, the tool call, token counts and the reward on the last call", async () => {
    const task = SEED_TASKS[0]!;
    const analysis = analyzeRollout(await spansOf(task));
    // the SDK's client span and the proxy's span record each call; the adapter keeps one per response id
    expect(analysis.calls).toHaveLength(4);
    expect(analysis.calls.filter((c) => !c.kept).map((c) => c.dropReason)).toEqual([
      "duplicate_response_id",
      "duplicate_response_id",
    ]);
    const [first, second] = analysis.calls.filter((c) => c.kept);
    expect(first!.input.map(messageText)).toEqual([CHAT_QUESTION(task)]);
    expect(first!.toolCalls.map((t) => [t.function.name, JSON.parse(t.function.arguments)])).toEqual([
      ["calculator", { a: task.a, b: task.b }],
    ]);
    expect(second!.input.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(messageDisplay(second!.input[1]!)).toBe(`→ calculator({"a":${task.a},"b":${task.b}})`);
    expect(messageText(second!.output[0]!)).toBe(`The answer is ${task.a + task.b}.`);
    expect(second!.completionTokens).toBe(`The answer is ${task.a + task.b}.`.length);
    expect(analysis.calls.every((c) => c.latencySeconds !== null && c.latencySeconds >= 0)).toBe(true);
    expect(analysis.triplets.map((t) => t.reward)).toEqual([null, 1]);
    expect(
      tripletTokens(analysis.triplets[1]!)
        .filter((c) => c.role === "response")
        .map((c) => c.id),
    ).toEqual(mockEncode(`The answer is ${task.a + task.b}.`));
    // the mock renders a chat prompt as JSON, so call 2's prompt does not extend call 1's: two rows
    expect(analysis.sequences).toHaveLength(2);
    expect(analysis.diagnostics.map((d) => d.code)).toContain("prefix_mismatch");
  });

  it("a completions (ReAct) rollout: one training row whose observation tokens are exactly the inserted text", async () => {
    const task = SEED_TASKS[1]!;
    const sum = task.a + task.b;
    const analysis = analyzeRollout(await spansOf(task));
    expect(analysis.sequences).toHaveLength(1);
    const cells = sequenceTokens(analysis.sequences[0]!);
    expect(cells.filter((c) => c.role === "prompt").map((c) => c.id)).toEqual(mockEncode(REACT_PROMPT(task)));
    expect(cells.filter((c) => c.role === "observation").map((c) => c.id)).toEqual(
      mockEncode(REACT_OBSERVATION(sum)),
    );
    expect(cells.filter((c) => c.role === "response").map((c) => c.id)).toEqual(
      mockEncode(`CALC ${task.a}+${task.b}ANSWER ${sum}`),
    );
    expect(analysis.sequences[0]!.reward).toBe(1);
  });

  it("the span tree of a real rollout holds the proxy's and the agent's spans on one timeline", async () => {
    const spans = await spansOf(SEED_TASKS[0]!);
    const timeline = buildSpanTimeline(spans);
    expect(timeline.rows.filter((r) => !r.virtual)).toHaveLength(spans.length);
    expect(timeline.rows.filter((r) => r.reward !== null).map((r) => r.reward)).toEqual([1]);
    expect(timeline.durationSeconds).toBeGreaterThan(0);
  });

  it("a crashed rollout yields no call and a diagnostic instead of an error", async () => {
    const analysis = analyzeRollout(await spansOf(SEED_TASKS[4]!));
    expect(analysis.calls).toEqual([]);
    expect(analysis.triplets).toEqual([]);
    expect(analysis.diagnostics.length).toBeGreaterThan(0);
  });
});
