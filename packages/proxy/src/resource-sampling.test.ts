import { describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

/** The LLM resource's sampling_parameters hold for calls that do not set them (issue: an unchanged agent). */

async function attemptWith(h: Harness, resourcesId: string, samplingParameters: Record<string, unknown>) {
  await h.store.updateResources(resourcesId, { main_llm: h.proxy.asResource({ samplingParameters }) });
  const r = await h.store.startRollout({ input: { q: 1 }, resources_id: resourcesId });
  return `${h.url}/rollout/${r.rollout_id}/attempt/${r.attempt.attempt_id}/v1`;
}

const upstreamBodies = (h: Harness) => h.mocks[0]!.requests.map((r) => r.body as Record<string, unknown>);
const messages = [{ role: "user" as const, content: "hi" }];

describe("the rollout's LLM resource sampling parameters", () => {
  it("fill in what a call leaves out; a call's own values win, and max_tokens can only get tighter", async () => {
    const h = await startHarness({ tap: false });
    try {
      const base = await attemptWith(h, "rs-train", {
        temperature: 0.3,
        top_p: 0.9,
        top_k: 5,
        max_tokens: 7,
      });
      const client = h.client(base);
      await client.chat.completions.create({ model: "policy", messages });
      await client.chat.completions.create({ model: "policy", messages, temperature: 1, max_tokens: 100 });
      await client.chat.completions.create({
        model: "policy",
        messages,
        max_completion_tokens: 2,
        top_p: 0.5,
      });
      await client.completions.create({ model: "policy", prompt: "hi" });
      const [bare, loose, tight, completion] = upstreamBodies(h);
      expect(bare).toMatchObject({ temperature: 0.3, top_p: 0.9, top_k: 5, max_tokens: 7 });
      expect(loose).toMatchObject({ temperature: 1, top_p: 0.9, max_tokens: 7 });
      expect(tight).toMatchObject({ temperature: 0.3, top_p: 0.5, max_completion_tokens: 2 });
      expect(tight).not.toHaveProperty("max_tokens");
      expect(completion).toMatchObject({ temperature: 0.3, max_tokens: 7 });
      // the span records what was sent
      const rid = new URL(base).pathname.split("/")[2] as string;
      const spans = await h.spans(rid);
      expect(spans.map((s) => s.attributes["gen_ai.request.max_tokens"])).toContain(7);
    } finally {
      await h.close();
    }
  });

  it("each rollout gets its own resource's values (train vs val); none published, nothing changes", async () => {
    const h = await startHarness({ tap: false });
    try {
      const train = await attemptWith(h, "rs-train", { temperature: 1, max_tokens: 9 });
      const val = await attemptWith(h, "rs-val", { temperature: 0, max_tokens: 9 });
      const plain = await attemptWith(h, "rs-plain", {});
      for (const base of [train, val, plain]) {
        await h.client(base).chat.completions.create({ model: "policy", messages });
      }
      const [t, v, p] = upstreamBodies(h);
      expect(t).toMatchObject({ temperature: 1, max_tokens: 9 });
      expect(v).toMatchObject({ temperature: 0, max_tokens: 9 });
      expect(p).not.toHaveProperty("max_tokens");
      expect(p).not.toHaveProperty("temperature");
    } finally {
      await h.close();
    }
  });

  it("resourceSampling: false forwards calls as they are", async () => {
    const h = await startHarness({ tap: false, proxy: { resourceSampling: false } });
    try {
      const base = await attemptWith(h, "rs-train", { temperature: 0.3, max_tokens: 7 });
      await h.client(base).chat.completions.create({ model: "policy", messages });
      expect(upstreamBodies(h)[0]).not.toHaveProperty("max_tokens");
    } finally {
      await h.close();
    }
  });
});
