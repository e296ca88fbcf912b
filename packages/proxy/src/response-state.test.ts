import { InMemoryLightningStore } from "@agl/core";
import { type MockLLMServer, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { buildCallSpan } from "./capture.js";
import { ResponseHistory } from "./dialects/index.js";
import { restoreFromSpan } from "./dialects/response-state.js";
import { LLMProxy } from "./proxy.js";

const quiet = { warn() {}, error() {} };
const tools = [
  {
    type: "function" as const,
    name: "calculator",
    parameters: { type: "object", properties: { expr: { type: "string" } } },
    strict: false,
  },
];
const IMAGE = "data:image/png;base64,iVBORw0KGgo=";

let cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

/** Calls the calculator when offered it and not yet answered; else says how many messages it got. */
function respond(req: { body: any }) {
  const messages: any[] = req.body.messages ?? [];
  if (req.body.tools && messages.at(-1)?.role !== "tool")
    return { content: "let me compute", tool_calls: [{ name: "calculator", arguments: '{"expr":"6*7"}' }] };
  const last = JSON.stringify(messages.at(-1)?.content);
  return {
    content: `${messages.length} messages, last: ${last.length > 40 ? `${last.slice(0, 40)}…` : last}`,
  };
}

async function setup(replicas: number, options: { responseCacheBytes?: number } = {}) {
  const store = new InMemoryLightningStore({ watchdog: false });
  const mock: MockLLMServer = await startMockLLMServer({ respond });
  const proxies = Array.from(
    { length: replicas },
    () =>
      new LLMProxy({
        store,
        backends: [{ url: mock.baseURL }],
        model: "policy",
        healthCheckIntervalMs: 0,
        logger: quiet,
        ...options,
      }),
  );
  const urls = await Promise.all(proxies.map((p) => p.start()));
  cleanup.push(async () => {
    await Promise.all(proxies.map((p) => p.stop()));
    await mock.close();
    await store.close();
  });
  const r = await store.startRollout({ input: {} });
  const path = `/rollout/${r.rollout_id}/attempt/${r.attempt.attempt_id}/v1`;
  const client = (i: number) =>
    new OpenAI({ baseURL: `${urls[i]}${path}`, apiKey: "x", maxRetries: 0, timeout: 20_000 });
  return { store, mock, proxies, client, rolloutId: r.rollout_id };
}

/**
 * One conversation (instructions, an image, a tool call with text, its result, a streamed turn, references)
 * where call k goes to replica `route(k)`. Returns the chat messages every call sent upstream.
 */
async function converse(replicas: number, route: (k: number) => number) {
  const s = await setup(replicas);
  const c = (k: number) => s.client(route(k));
  const r1 = await c(0).responses.create({
    model: "m",
    instructions: "be exact",
    input: [
      {
        role: "user",
        content: [
          { type: "input_text", text: "what is in " },
          { type: "input_image", image_url: IMAGE, detail: "auto" },
        ],
      },
    ],
  });
  const r2 = await c(1).responses.create({
    model: "m",
    previous_response_id: r1.id,
    input: 'compute 6*7 (a "quoted" ["json-like"] text)',
    tools,
  });
  const call = r2.output.find((o) => o.type === "function_call")!;
  const r3 = await c(2)
    .responses.stream({
      model: "m",
      previous_response_id: r2.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "42" }],
      tools,
    })
    .finalResponse();
  await c(3).responses.create({
    model: "m",
    previous_response_id: r3.id,
    input: [
      { type: "item_reference", id: r2.output[0]!.id! },
      { type: "item_reference", id: call.id! },
      { role: "developer", content: "again" },
    ],
  });
  return s.mock.requests.filter((q) => q.path.endsWith("/chat/completions")).map((q) => q.body.messages);
}

describe("Responses state lives in the store (the spans)", () => {
  it("a conversation alternating between two replicas sends the engine exactly what one proxy sends", async () => {
    const single = await converse(1, () => 0);
    const alternating = await converse(2, (k) => k % 2);
    expect(single).toHaveLength(4);
    expect(alternating).toEqual(single);
    // the restored history kept the image as parts and the text that looks like JSON as text
    expect(alternating[3]![0].content[1]).toEqual({ type: "image_url", image_url: { url: IMAGE } });
    expect(alternating[3]![2].content).toBe('compute 6*7 (a "quoted" ["json-like"] text)');
  });

  it("a response id another replica handed out before its span landed is waited for, then resolved", async () => {
    const s = await setup(1);
    const r1 = await s.client(0).responses.create({ model: "m", input: "hello" });
    await s.proxies[0]!.flush();
    const [span] = (await s.store.querySpans(s.rolloutId)).items;
    // another store that has the attempt but not yet the span (the write is still on its way)
    const late = new InMemoryLightningStore({ watchdog: false });
    cleanup.push(() => late.close());
    const other = await late.startRollout({ input: {} });
    const scope = { rolloutId: other.rollout_id, attemptId: other.attempt.attempt_id };
    let asked!: () => void;
    const firstQuery = new Promise<void>((r) => {
      asked = r;
    });
    const spy = {
      querySpans: (...args: Parameters<InMemoryLightningStore["querySpans"]>) => {
        asked();
        return late.querySpans(...args);
      },
    };
    const history = new ResponseHistory({ store: spy, waitMs: 60_000 });
    const lookup = history.conversation(scope, r1.id);
    await firstQuery; // it looked, found nothing, and keeps looking
    await late.addSpan({ ...span!, rollout_id: scope.rolloutId, attempt_id: scope.attemptId });
    expect(await lookup).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: '1 messages, last: "hello"' },
    ]);
    // another attempt never resolves it; an id that names no span is not waited for
    const elsewhere = await late.startRollout({ input: {} });
    const noWait = new ResponseHistory({ store: late, waitMs: 0 });
    expect(
      await noWait.conversation(
        { rolloutId: elsewhere.rollout_id, attemptId: elsewhere.attempt.attempt_id },
        r1.id,
      ),
    ).toBeUndefined();
    expect(await history.conversation(scope, "resp_not-one-of-ours")).toBeUndefined();
  });

  it("the in-process cache stays within its byte budget; evicted responses come back from the store", async () => {
    const budget = 128 * 1024;
    const s = await setup(1, { responseCacheBytes: budget });
    const big = "x".repeat(32 * 1024);
    const ids: string[] = [];
    let previous: string | undefined;
    for (let i = 0; i < 12; i++) {
      const r = await s
        .client(0)
        .responses.create({ model: "m", input: `${i} ${big}`, previous_response_id: previous });
      ids.push(r.id);
      previous = i % 3 === 2 ? undefined : r.id; // some conversations continue, others start over
    }
    const history = (s.proxies[0] as any).handler.history as ResponseHistory;
    expect(history.bytes).toBeLessThanOrEqual(budget);
    expect(history.bytes).toBeGreaterThan(0);
    // the first response has long been evicted from the cache; the store still has it
    const again = await s
      .client(0)
      .responses.create({ model: "m", input: "more", previous_response_id: ids[0] });
    expect(again.output_text).toBe('3 messages, last: "more"');
  });

  it("spans of failed, unattributed or store: false calls carry no state; restore needs the status ok", async () => {
    const s = await setup(1);
    const r = await s.client(0).responses.create({ model: "m", input: "kept", store: false });
    await s.proxies[0]!.flush();
    const [span] = (await s.store.querySpans(s.rolloutId)).items;
    expect(span!.attributes["agl.proxy.responses.id"]).toBeUndefined();
    expect(restoreFromSpan(span!)).toBeNull();
    await expect(
      s.client(0).responses.create({ model: "m", input: "x", previous_response_id: r.id }),
    ).rejects.toMatchObject({ status: 400, param: "previous_response_id" });
    const call = {
      rolloutId: "r",
      attemptId: "a",
      sequenceId: 1,
      style: "path" as const,
      mode: null,
      sessionId: null,
      isChat: true,
      request: { model: "m", messages: [{ role: "user", content: "q" }] },
      clientModel: "m",
      response: { choices: [{ index: 0, message: { role: "assistant", content: "a" } }] },
      rawResponse: null,
      httpStatus: 500,
      error: "upstream returned HTTP 500",
      stream: false,
      partial: false,
      backend: null,
      modelVersion: null,
      retryCount: 0,
      startMs: 0,
      endMs: 1,
      ttftMs: null,
      spanId: "0123456789abcdef",
      dialectAttributes: { "agl.proxy.responses.id": "resp_0123456789abcdef" },
    };
    const failed = buildCallSpan(call, { captureBodies: false, maxBodyChars: 1000 });
    expect(failed.attributes!["agl.proxy.responses.id"]).toBeUndefined();
    const ok = buildCallSpan(
      {
        ...call,
        httpStatus: 200,
        error: null,
        dialectAttributes: {
          ...call.dialectAttributes,
          "agl.proxy.responses.history_start": 0,
          "agl.proxy.responses.items": ["msg_0123456789abcdef"],
        },
      },
      { captureBodies: false, maxBodyChars: 1000 },
    );
    expect(restoreFromSpan(ok as any)).toEqual({
      responseId: "resp_0123456789abcdef",
      conversation: [
        { role: "user", content: "q" },
        { role: "assistant", content: "a" },
      ],
      items: [
        [
          "msg_0123456789abcdef",
          {
            type: "message",
            id: "msg_0123456789abcdef",
            status: "completed",
            role: "assistant",
            content: [{ type: "output_text", text: "a", annotations: [] }],
          },
        ],
      ],
    });
  });
});
