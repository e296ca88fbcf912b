/**
 * `/v1/responses` and `/v1/messages` calls become the same triplets as the chat/completions call with the
 * same conversation: the proxy serves them over the upstream's chat API, so the engine sees one prompt.
 */

import { ProxySpansToTriplets } from "@agl/adapter";
import { InMemoryLightningStore } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { expect, it } from "vitest";
import { quietProxy } from "../support/quiet-proxy.js";

it("chat, responses and messages calls of one conversation adapt to identical triplets", async () => {
  const mock = await startMockLLMServer({});
  const store = new InMemoryLightningStore({ watchdog: false });
  const proxy = quietProxy(store, mock.baseURL);
  const url = await proxy.start();
  try {
    const triplets: unknown[] = [];
    for (const api of ["chat", "responses", "messages"] as const) {
      const r = await store.startRollout({ input: {} });
      const base = `${url}/rollout/${r.rollout_id}/attempt/${r.attempt.attempt_id}`;
      const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "x", maxRetries: 0 });
      const anthropic = new Anthropic({ baseURL: base, apiKey: "x", maxRetries: 0 });
      for (const stream of [false, true]) {
        if (api === "chat") {
          const messages = [
            { role: "system" as const, content: "sys" },
            { role: "user" as const, content: "hi there" },
          ];
          if (stream)
            for await (const _ of await openai.chat.completions.create({ model: "m", messages, stream }));
          else await openai.chat.completions.create({ model: "m", messages });
        } else if (api === "responses") {
          const p = { model: "m", instructions: "sys", input: "hi there" };
          if (stream) await openai.responses.stream(p).finalResponse();
          else await openai.responses.create(p);
        } else {
          const p = {
            model: "m",
            max_tokens: 64,
            system: "sys",
            messages: [{ role: "user" as const, content: "hi there" }],
          };
          if (stream) await anthropic.messages.stream(p).finalMessage();
          else await anthropic.messages.create(p);
        }
      }
      await proxy.flush();
      const spans = (await store.querySpans(r.rollout_id)).items;
      const out = new ProxySpansToTriplets().adapt(spans);
      expect(out).toHaveLength(2);
      triplets.push(
        out.map((t) => ({
          prompt: t.prompt.token_ids,
          response: t.response.token_ids,
          lp: t.response.logprobs,
        })),
      );
    }
    expect(triplets[1]).toEqual(triplets[0]);
    expect(triplets[2]).toEqual(triplets[0]);
    expect((triplets[0] as any)[0].response.length).toBeGreaterThan(0);
  } finally {
    await proxy.stop();
    await mock.close();
  }
});
