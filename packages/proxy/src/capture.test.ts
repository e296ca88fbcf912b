import { mockEncode } from "@agl/core/mock-llm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  comparable,
  type Harness,
  sseEvents,
  startHarness,
  calculatorTools as tools,
} from "./test-support/harness.js";

describe("capture through the proxy (real openai SDK, vLLM-like upstream)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      mocks: [
        {
          respond: (req, i) => {
            const last = req.body.messages?.at(-1)?.content ?? req.body.prompt;
            if (req.body.tools && !String(last).includes("result")) {
              return { content: null, tool_calls: [{ name: "calculator", arguments: `{"expr":"${i}+2"}` }] };
            }
            return { content: `answer ${i}: ${String(last).slice(0, 12)} ü€` };
          },
        },
      ],
    });
  });
  afterAll(() => h.close());

  for (const stream of [false, true]) {
    for (const withTools of [false, true]) {
      it(`chat ${stream ? "streamed" : "non-streamed"}${withTools ? " with tools" : ""}, n=2: span ids equal the upstream's`, async () => {
        const { rolloutId, attemptId } = await h.newAttempt();
        const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
        const messages = [
          { role: "system" as const, content: "be brief" },
          { role: "user" as const, content: "what is 2+2?" },
        ];
        const params = {
          model: "anything",
          messages,
          n: 2,
          seed: 7,
          max_tokens: 64,
          stop: ["\n\n"],
          ...(withTools ? { tools } : {}),
        };
        const tapBefore = h.taps[0]!.exchanges.length;
        let clientIds: number[][] = [[], []];
        let clientText: string;
        if (stream) {
          const s = await h
            .client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`)
            .chat.completions.create({ ...params, stream: true });
          for await (const chunk of s) {
            for (const c of chunk.choices) clientIds[c.index]!.push(...((c as any).token_ids ?? []));
          }
          clientText = "";
        } else {
          const raw = await client.chat.completions.create(params).asResponse();
          clientText = await raw.text();
          const body = JSON.parse(clientText);
          clientIds = body.choices.map((c: any) => c.token_ids);
        }
        const spans = await h.spans(rolloutId);
        expect(spans).toHaveLength(1);
        const span = spans[0]!;
        const a = span.attributes as Record<string, any>;
        const ex = h.taps[0]!.exchanges[tapBefore]!;
        const sent = JSON.parse(ex.requestBody);
        // what went upstream: rewritten model, injected fields, client params passed through
        expect(sent).toMatchObject({
          model: "policy",
          return_token_ids: true,
          logprobs: true,
          n: 2,
          seed: 7,
          max_tokens: 64,
          stop: ["\n\n"],
        });
        if (withTools) expect(sent.tools).toEqual(tools);
        expect(a["agl.proxy.request"]).toBe(ex.requestBody);

        // ground truth: the upstream's own bytes, decoded independently of the proxy
        let upstream: any;
        if (stream) {
          const events = sseEvents(ex.responseBody);
          const ids: number[][] = [[], []];
          const lps: number[][] = [[], []];
          let promptIds: number[] | undefined;
          for (const e of events) {
            promptIds ??= e.prompt_token_ids;
            for (const c of e.choices) {
              ids[c.index]!.push(...(c.token_ids ?? []));
              lps[c.index]!.push(...(c.logprobs?.content ?? []).map((x: any) => x.logprob));
            }
          }
          upstream = { promptIds, ids, lps };
        } else {
          expect(a["agl.proxy.response"]).toBe(ex.responseBody);
          expect(clientText).toBe(ex.responseBody);
          const body = JSON.parse(ex.responseBody);
          upstream = {
            promptIds: body.prompt_token_ids,
            ids: body.choices.map((c: any) => c.token_ids),
            lps: body.choices.map((c: any) => c.logprobs.content.map((x: any) => x.logprob)),
          };
        }
        expect(upstream.promptIds).toEqual(mockEncode(JSON.stringify(sent.messages)));
        expect(a.prompt_token_ids).toEqual(upstream.promptIds);
        expect(a.response_token_ids).toEqual(upstream.ids[0]);
        expect(a["agl.choices.0.token_ids"]).toEqual(upstream.ids[0]);
        expect(a["agl.choices.1.token_ids"]).toEqual(upstream.ids[1]);
        expect(a["agl.choices.0.logprobs"]).toEqual(upstream.lps[0]);
        expect(a["agl.choices.1.logprobs"]).toEqual(upstream.lps[1]);
        expect(a["agl.response_logprobs"]).toEqual(upstream.lps[0]);
        expect(clientIds).toEqual(upstream.ids);
        expect(upstream.ids[0].length).toBeGreaterThan(0);
        expect(JSON.parse(a["logprobs.content"]).map((x: any) => x.logprob)).toEqual(upstream.lps[0]);
        if (withTools) {
          expect(JSON.parse(a["gen_ai.completion.1.tool_calls"])[0].function).toEqual({
            name: "calculator",
            arguments: '{"expr":"1+2"}',
          });
          expect(a["gen_ai.completion.0.finish_reason"]).toBe("tool_calls");
        } else {
          expect(a["gen_ai.completion.1.content"]).toBe("answer 1: what is 2+2? ü€");
        }
        expect(span).toMatchObject({
          rollout_id: rolloutId,
          attempt_id: attemptId,
          sequence_id: 1,
          name: "openai.chat.completion",
        });
        expect(span.status.status_code).toBe("OK");
        expect(a).toMatchObject({
          "gen_ai.request.model": "policy",
          "agl.proxy.client_model": "anything",
          "gen_ai.request.n": 2,
          "gen_ai.request.seed": 7,
          "gen_ai.prompt.1.content": "what is 2+2?",
          "agl.proxy.status": "ok",
          "agl.proxy.http_status": 200,
          "agl.proxy.stream": stream,
          "agl.proxy.partial": false,
          "agl.proxy.token_ids_missing": false,
          "agl.proxy.attribution": "path",
          "agl.proxy.backend": `${h.taps[0]!.url}/v1`,
        });
        expect(a["agl.proxy.latency_ms"]).toBeGreaterThan(0);
      });
    }
  }

  it("a streamed call records the same span as the non-streamed one", async () => {
    const spansFor = async (stream: boolean) => {
      const { rolloutId, attemptId } = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
      const params = {
        model: "m",
        messages: [{ role: "user" as const, content: "use the tool" }],
        tools,
        n: 2,
      };
      if (stream) for await (const _ of await client.chat.completions.create({ ...params, stream: true }));
      else await client.chat.completions.create(params);
      return (await h.spans(rolloutId))[0]!;
    };
    const plain = await spansFor(false);
    const streamed = await spansFor(true);
    expect(comparable(streamed.attributes)).toEqual(comparable(plain.attributes));
    expect(JSON.parse(streamed.attributes["agl.proxy.request"] as string)).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(streamed.attributes["agl.proxy.ttft_ms"]).toBeGreaterThanOrEqual(0);
  });

  for (const stream of [false, true]) {
    it(`completions ${stream ? "streamed" : "non-streamed"}, n=2 (per-choice prompt ids, token_logprobs)`, async () => {
      const { rolloutId, attemptId } = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
      const tapBefore = h.taps[0]!.exchanges.length;
      if (stream)
        for await (const _ of await client.completions.create({
          model: "x",
          prompt: "1+1=",
          n: 2,
          stream: true,
        }));
      else await client.completions.create({ model: "x", prompt: "1+1=", n: 2 });
      const [span] = await h.spans(rolloutId);
      const a = span!.attributes as Record<string, any>;
      const ex = h.taps[0]!.exchanges[tapBefore]!;
      expect(JSON.parse(ex.requestBody)).toMatchObject({ logprobs: 1, return_token_ids: true });
      expect(span!.name).toBe("openai.completion");
      expect(a.prompt_token_ids).toEqual(mockEncode("1+1="));
      for (const i of [0, 1]) {
        const text = `answer ${i}: 1+1= ü€`;
        expect(a[`agl.choices.${i}.token_ids`]).toEqual(mockEncode(text));
        expect(a[`gen_ai.completion.${i}.content`]).toBe(text);
        expect(a[`agl.choices.${i}.logprobs`]).toHaveLength(text.length);
      }
      if (!stream) expect(a["agl.proxy.response"]).toBe(ex.responseBody);
    });
  }

  it("an upstream without token ids is recorded and flagged", async () => {
    const noIds = await startHarness({ proxy: { returnTokenIds: false }, tap: false });
    try {
      const r = await noIds.newAttempt();
      await noIds
        .client(`${noIds.url}/rollout/${r.rolloutId}/attempt/${r.attemptId}/v1`)
        .chat.completions.create({
          model: "m",
          messages: [{ role: "user", content: "hi" }],
        });
      const [span] = await noIds.spans(r.rolloutId);
      expect(span!.attributes["agl.proxy.token_ids_missing"]).toBe(true);
      expect(span!.attributes["gen_ai.completion.0.content"]).toBe("Echo: hi");
      expect(span!.attributes.prompt_token_ids).toBeUndefined();
      expect(noIds.warnings.some((w) => w.includes("no token ids"))).toBe(true);
    } finally {
      await noIds.close();
    }
  });

  it("by default leaves out the raw bodies and the verbose v0.3 logprobs.content, keeping every number", async () => {
    const lean = await startHarness({ proxy: { captureBodies: false }, tap: false });
    try {
      const r = await lean.newAttempt();
      const out = await lean
        .client(`${lean.url}/rollout/${r.rolloutId}/attempt/${r.attemptId}/v1`)
        .chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
      const [span] = await lean.spans(r.rolloutId);
      const a = span!.attributes;
      expect(a["agl.proxy.request"]).toBeUndefined();
      expect(a["agl.proxy.response"]).toBeUndefined();
      expect(a["logprobs.content"]).toBeUndefined();
      expect(a["agl.response_logprobs"]).toEqual(out.choices[0]!.logprobs!.content!.map((x) => x.logprob));
      expect(a.response_token_ids).toEqual((out.choices[0] as any).token_ids);
    } finally {
      await lean.close();
    }
  });

  it("with logprobs injection off, sends no logprobs unless the client asks, and records the ids anyway", async () => {
    const off = await startHarness({ proxy: { logprobs: false } });
    try {
      const r = await off.newAttempt();
      const client = off.client(`${off.url}/rollout/${r.rolloutId}/attempt/${r.attemptId}/v1`);
      const chatMessages = [{ role: "user" as const, content: "hi" }];
      await client.chat.completions.create({ model: "m", messages: chatMessages });
      await client.completions.create({ model: "m", prompt: "1+1=" });
      // what the client asks for passes through untouched
      await client.chat.completions.create({
        model: "m",
        messages: chatMessages,
        logprobs: true,
        top_logprobs: 2,
      });
      const sent = off.taps[0]!.exchanges.map((e) => JSON.parse(e.requestBody));
      expect(sent).toHaveLength(3);
      expect(sent[0].logprobs).toBeUndefined();
      expect(sent[1].logprobs).toBeUndefined();
      expect(sent[2]).toMatchObject({ logprobs: true, top_logprobs: 2 });
      for (const s of sent) expect(s.return_token_ids).toBe(true);
      const spans = await off.spans(r.rolloutId);
      expect(spans).toHaveLength(3);
      const [chat, completion, asked] = spans.map((s) => s.attributes);
      expect(chat!.response_token_ids).toEqual(mockEncode("Echo: hi"));
      expect(chat!["agl.response_logprobs"]).toBeUndefined();
      expect(completion!.prompt_token_ids).toEqual(mockEncode("1+1="));
      expect(completion!["agl.response_logprobs"]).toBeUndefined();
      expect(asked!["agl.response_logprobs"]).toHaveLength("Echo: hi".length);
      expect(chat!["agl.proxy.token_ids_missing"]).toBe(false);
    } finally {
      await off.close();
    }
  });

  it("allocates one increasing sequence id per request, in arrival order per rollout", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
    for (let i = 0; i < 3; i++)
      await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: `q${i}` }] });
    const spans = await h.spans(rolloutId);
    expect(spans.map((s) => [s.sequence_id, s.attributes["gen_ai.prompt.0.content"]])).toEqual([
      [1, "q0"],
      [2, "q1"],
      [3, "q2"],
    ]);
  });
});
