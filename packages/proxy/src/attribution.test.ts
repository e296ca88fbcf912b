import { resolveForAttempt, type Span, type SpanInput } from "@agl/core";
import { type MockReply, type MockRequestInfo, mockEncode } from "@agl/core/mock-llm";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SpanSink } from "./options.js";
import {
  comparable,
  type Harness,
  sseEvents,
  startHarness,
  type TapExchange,
  calculatorTools as tools,
} from "./test-support/harness.js";

/** The default mock echo, plus a tool call per choice when tools are offered. */
const respond = (req: MockRequestInfo, i: number): MockReply => {
  if (req.body.tools)
    return { content: null, tool_calls: [{ name: "calculator", arguments: `{"expr":"${i}+2"}` }] };
  const last = [...(req.body.messages ?? [])].reverse().find((m: any) => m.role === "user");
  return { content: `Echo: ${last?.content}` };
};

describe("attribution styles", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ mocks: [{ respond }] });
  });
  afterAll(() => h.close());

  const messages = [{ role: "user" as const, content: "ping" }];
  /** Per style: plain, then tools with n=2, each non-streamed and streamed. */
  const calls = [
    { params: { model: "m", messages }, stream: false },
    { params: { model: "m", messages }, stream: true },
    { params: { model: "m", messages, tools, n: 2 }, stream: false },
    { params: { model: "m", messages, tools, n: 2 }, stream: true },
  ];

  /** Ids and logprobs per choice, decoded from the upstream's own bytes (independently of the proxy). */
  function upstreamTruth(ex: TapExchange, stream: boolean) {
    if (!stream) {
      const body = JSON.parse(ex.responseBody);
      return {
        promptIds: body.prompt_token_ids as number[],
        ids: body.choices.map((c: any) => c.token_ids) as number[][],
        lps: body.choices.map((c: any) => c.logprobs.content.map((x: any) => x.logprob)) as number[][],
      };
    }
    const ids: number[][] = [];
    const lps: number[][] = [];
    let promptIds: number[] | undefined;
    for (const e of sseEvents(ex.responseBody)) {
      promptIds ??= e.prompt_token_ids;
      for (const c of e.choices) {
        (ids[c.index] ??= []).push(...(c.token_ids ?? []));
        (lps[c.index] ??= []).push(...(c.logprobs?.content ?? []).map((x: any) => x.logprob));
      }
    }
    return { promptIds: promptIds!, ids, lps };
  }

  /**
   * Runs the four calls of `calls` with the client and checks: the client received the upstream's bytes
   * byte for byte (streamed too), each span's ids and logprobs equal the upstream's, and a streamed call's
   * span equals the non-streamed one's.
   */
  async function expectRecorded(
    client: ReturnType<Harness["client"]>,
    rolloutId: string,
    attemptId: string,
    style: string,
    extra: Record<string, unknown> = {},
  ) {
    const tap = h.taps[0]!;
    const before = tap.exchanges.length;
    const received: Buffer[] = [];
    for (const { params, stream } of calls) {
      const raw = await client.chat.completions.create({ ...params, stream } as any).asResponse();
      expect(raw.status).toBe(200);
      received.push(Buffer.from(await raw.arrayBuffer()));
    }
    const spans = (await h.spans(rolloutId)).sort((a, b) => a.sequence_id - b.sequence_id);
    expect(spans.map((s) => s.sequence_id)).toEqual([1, 2, 3, 4]);
    const exchanges = tap.exchanges.slice(before);
    expect(exchanges).toHaveLength(4);
    calls.forEach(({ params, stream }, i) => {
      const ex = exchanges[i]!;
      const span = spans[i]!;
      const a = span.attributes as Record<string, any>;
      expect(received[i]!.length).toBeGreaterThan(0);
      expect(received[i]!.equals(ex.responseBytes)).toBe(true);
      expect(JSON.parse(ex.requestBody)).toMatchObject({ model: "policy", return_token_ids: true, stream });
      const truth = upstreamTruth(ex, stream);
      const n = "n" in params && params.n ? params.n : 1;
      expect(truth.ids).toHaveLength(n);
      expect(span.attempt_id).toBe(attemptId);
      expect(a).toMatchObject({
        "agl.proxy.attribution": style,
        "agl.proxy.stream": stream,
        "agl.proxy.status": "ok",
        ...extra,
      });
      expect(a.prompt_token_ids).toEqual(truth.promptIds);
      expect(a.response_token_ids).toEqual(truth.ids[0]);
      expect(a["agl.response_logprobs"]).toEqual(truth.lps[0]);
      for (let k = 0; k < n; k++) {
        expect(a[`agl.choices.${k}.token_ids`]).toEqual(truth.ids[k]);
        expect(a[`agl.choices.${k}.logprobs`]).toEqual(truth.lps[k]);
        expect(truth.ids[k]!.length).toBeGreaterThan(0);
      }
      if ("tools" in params) {
        expect(JSON.parse(a["gen_ai.completion.1.tool_calls"])[0].function).toEqual({
          name: "calculator",
          arguments: '{"expr":"1+2"}',
        });
      } else {
        expect(a.response_token_ids).toEqual(mockEncode("Echo: ping"));
      }
    });
    // a streamed call records what the non-streamed call records
    expect(comparable(spans[1]!.attributes)).toEqual(comparable(spans[0]!.attributes));
    expect(comparable(spans[3]!.attributes)).toEqual(comparable(spans[2]!.attributes));
    return spans;
  }

  const styles: Array<{
    name: string;
    style: string;
    setup(a: { rolloutId: string; attemptId: string }): { client: OpenAI; extra?: Record<string, unknown> };
  }> = [
    {
      name: "v0.x path prefix /rollout/{rid}/attempt/{aid}/v1 (what a ProxyLLM resolves to)",
      style: "path",
      setup: ({ rolloutId, attemptId }) => {
        const llm = resolveForAttempt(h.proxy.asResource({ model: "policy" }), rolloutId, attemptId);
        expect(llm.endpoint).toBe(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
        return { client: h.client(llm.endpoint) };
      },
    },
    {
      name: "v0.x path prefix without /v1 (ProxyLLM endpoint given without it)",
      style: "path",
      setup: ({ rolloutId, attemptId }) => ({
        client: h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}`),
      }),
    },
    {
      name: "v1.0 path /proxy/rollout/{rid}/attempt/{aid}/mode/train/openai/v1",
      style: "proxy_path",
      setup: ({ rolloutId, attemptId }) => ({
        client: h.client(`${h.url}/proxy/rollout/${rolloutId}/attempt/${attemptId}/mode/train/openai/v1`),
        extra: { "agl.proxy.mode": "train", "gen_ai.request.temperature": 1 },
      }),
    },
    {
      name: "headers x-rollout-id / x-attempt-id",
      style: "header",
      setup: ({ rolloutId, attemptId }) => ({
        client: h.client(`${h.url}/v1`, {
          headers: { "x-rollout-id": rolloutId, "x-attempt-id": attemptId },
        }),
      }),
    },
    {
      name: "trace header (verl recipe 003) bound to the attempt through a session",
      style: "trace_header",
      setup: ({ rolloutId, attemptId }) => {
        h.proxy.createSession(`trace-${rolloutId}`, { rolloutId, attemptId });
        return {
          client: h.client(`${h.url}/v1`, { headers: { trace_id: `trace-${rolloutId}` } }),
          extra: { "agl.proxy.session_id": `trace-${rolloutId}` },
        };
      },
    },
    {
      name: "verl PR #83 session base URL /{session}/v1",
      style: "session",
      setup: ({ rolloutId, attemptId }) => {
        h.proxy.createSession(`trial-${rolloutId}`, { rolloutId, attemptId });
        return {
          client: h.client(`${h.url}/trial-${rolloutId}/v1`),
          extra: { "agl.proxy.session_id": `trial-${rolloutId}` },
        };
      },
    },
    {
      name: "a per-attempt token alone (Authorization: Bearer agl1.…)",
      style: "token",
      setup: ({ rolloutId, attemptId }) => ({
        client: h.client(`${h.url}/v1`, { apiKey: h.proxy.mintAttemptToken(rolloutId, attemptId) }),
      }),
    },
  ];

  for (const s of styles) {
    it(`${s.name}: plain and tools with n=2, streamed bytes and spans equal the upstream's`, async () => {
      const attempt = await h.newAttempt();
      const { client, extra } = s.setup(attempt);
      await expectRecorded(client, attempt.rolloutId, attempt.attemptId, s.style, extra);
    });
  }

  it("v1.0 val mode rewrites (temperature 0.7, no logprobs) and rejects unknown modes", async () => {
    const val = await h.newAttempt();
    const before = h.taps[0]!.exchanges.length;
    await h
      .client(`${h.url}/proxy/rollout/${val.rolloutId}/attempt/${val.attemptId}/mode/val/openai/v1`)
      .chat.completions.create({ model: "m", messages, temperature: 0.2 });
    const sent = JSON.parse(h.taps[0]!.exchanges[before]!.requestBody);
    expect(sent.temperature).toBe(0.7);
    expect(sent.logprobs).toBeUndefined();
    expect(sent.return_token_ids).toBe(true);
    const bad = await fetch(`${h.url}/proxy/rollout/r/attempt/a/mode/test/openai/v1/chat/completions`, {
      method: "POST",
      body: "{}",
    });
    expect(bad.status).toBe(404);
  });

  it("trace header: the configured name matches whatever its case, and an unbound id is the rollout id", async () => {
    // a store that takes any attempt (as verl recipe 003's own bookkeeping would), so the fallback is visible
    const spans: SpanInput[] = [];
    let seq = 0;
    const sink: SpanSink = {
      addSpan: async (span) => {
        spans.push(span);
        return span as Span;
      },
      getNextSpanSequenceId: async () => ++seq,
    };
    const t = await startHarness({ mocks: [{ respond }], proxy: { store: sink, traceHeader: "X-Trace-Id" } });
    try {
      t.proxy.createSession("bound-trace", { rolloutId: "ro-bound", attemptId: "at-bound" });
      await t
        .client(`${t.url}/v1`, { headers: { "X-Trace-Id": "bound-trace" } })
        .chat.completions.create({ model: "m", messages });
      await t
        .client(`${t.url}/v1`, { headers: { "x-trace-id": "verl-trace-7" } })
        .chat.completions.create({ model: "m", messages });
      // the default name is no longer consulted
      await t
        .client(`${t.url}/v1`, { headers: { trace_id: "ignored" } })
        .chat.completions.create({ model: "m", messages });
      await t.proxy.flush();
      expect(spans.map((x) => [x.rollout_id, x.attempt_id, x.attributes?.["agl.proxy.attribution"]])).toEqual(
        [
          ["ro-bound", "at-bound", "trace_header"],
          ["verl-trace-7", "0", "trace_header"],
        ],
      );
      expect(spans[0]!.attributes?.["agl.proxy.session_id"]).toBe("bound-trace");
      expect(spans[1]!.attributes?.["agl.proxy.session_id"]).toBeUndefined();
      expect(spans[1]!.attributes?.response_token_ids).toEqual(mockEncode("Echo: ping"));
    } finally {
      await t.close();
    }
  });

  it("header attribution needs both headers", async () => {
    const { rolloutId } = await h.newAttempt();
    const one = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "x-rollout-id": rolloutId, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages }),
    });
    expect(one.status).toBe(400);
  });

  it("verl PR #83 sessions: POST/GET/complete/DELETE and the /{session}/v1 base URL", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const created = await fetch(`${h.url}/sessions/trial-1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rollout_id: rolloutId, attempt_id: attemptId }),
    });
    expect(await created.json()).toMatchObject({
      session_id: "trial-1",
      status: "created",
      rollout_id: rolloutId,
    });
    await expectRecorded(h.client(`${h.url}/trial-1/v1`), rolloutId, attemptId, "session", {
      "agl.proxy.session_id": "trial-1",
    });
    // the alternate form /v1/chat/completions/{session}
    const alt = await fetch(`${h.url}/v1/chat/completions/trial-1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "again" }] }),
    });
    expect(alt.status).toBe(200);
    await h.proxy.flush();
    await fetch(`${h.url}/sessions/trial-1/complete`, { method: "POST" });
    const record = await (await fetch(`${h.url}/sessions/trial-1`)).json();
    expect(record.completed).toBe(true);
    // plain, streamed, tools, tools streamed (expectRecorded), then the alternate form
    expect(record.turns).toHaveLength(5);
    expect(record.turns[0]).toMatchObject({
      request_messages: messages,
      completion_text: "Echo: ping",
      completion_token_ids: mockEncode("Echo: ping"),
      finish_reason: "stop",
      prompt_token_ids: mockEncode(JSON.stringify(messages)),
    });
    expect(record.turns[0].completion_logprobs).toHaveLength("Echo: ping".length);
    expect(record.turns[1]).toEqual(record.turns[0]);
    expect(record.turns[2].tool_calls[0].function.name).toBe("calculator");
    expect(record.turns[4].completion_text).toBe("Echo: again");
    expect((await fetch(`${h.url}/sessions/trial-1`, { method: "DELETE" })).status).toBe(200);
    expect((await fetch(`${h.url}/sessions/trial-1`)).status).toBe(404);
  });

  it("GET /v1/models under every base URL, and /health", async () => {
    for (const base of [
      `${h.url}/v1`,
      `${h.url}/rollout/r1/attempt/a1/v1`,
      `${h.url}/proxy/rollout/r/attempt/a/mode/val/openai/v1`,
      `${h.url}/s1/v1`,
    ]) {
      const models = await h.client(base).models.list();
      expect(models.data.map((m) => m.id)).toEqual(["policy"]);
    }
    const health = await (await fetch(`${h.url}/health`)).json();
    expect(health).toMatchObject({ status: "ok", paused: false, inflight: 0 });
    expect(health.backends).toHaveLength(1);
  });

  it("unattributed calls are forwarded without a span, or rejected when configured", async () => {
    const out = await h.client(`${h.url}/v1`).chat.completions.create({ model: "m", messages });
    expect(out.choices[0]!.message.content).toBe("Echo: ping");
    const strict = await startHarness({ proxy: { unattributed: "reject" }, tap: false });
    try {
      await expect(
        strict.client(`${strict.url}/v1`).chat.completions.create({ model: "m", messages }),
      ).rejects.toMatchObject({
        status: 400,
      });
    } finally {
      await strict.close();
    }
  });
});
