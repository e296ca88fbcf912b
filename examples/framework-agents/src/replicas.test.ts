/**
 * The AI SDK's default `openai(model)` names every earlier output by `item_reference`: the proxy must
 * resolve them whichever replica answered before, including one restarted since. Two proxies on one store; every call goes to the other replica, and the
 * first replica is restarted mid-conversation.
 */
import { InMemoryLightningStore } from "@agl/core";
import { type MockLLMServer, startMockLLMServer } from "@agl/core/mock-llm";
import { LLMProxy } from "@agl/proxy";
import { createOpenAI } from "@ai-sdk/openai";
import { afterEach, describe, expect, it } from "vitest";
import { runAiSdkAgent } from "./ai-sdk-agent.js";
import { addingModel } from "./model.js";

const quiet = { warn() {}, error: (m: string) => console.error(m) };

let cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

/** Two proxy replicas on one store; `restart(i)` stops replica i and starts a fresh one on its port. */
async function replicas(store: InMemoryLightningStore, mock: MockLLMServer) {
  const make = (port = 0) =>
    new LLMProxy({
      store,
      backends: [{ url: mock.baseURL }],
      model: "policy",
      port,
      healthCheckIntervalMs: 0,
      logger: quiet,
    });
  const proxies = [make(), make()];
  const urls = await Promise.all(proxies.map((p) => p.start()));
  cleanup.push(() => Promise.all(proxies.map((p) => p.stop())));
  return {
    urls,
    async restart(i: number) {
      await proxies[i]!.stop();
      proxies[i] = make(Number(new URL(urls[i]!).port));
      await proxies[i]!.start();
    },
    flush: () => Promise.all(proxies.map((p) => p.flush())),
  };
}

/**
 * A `fetch` for the SDKs that sends call n to replica n % 2 (the path, naming the attempt, is kept) and,
 * before call `restartAt`, restarts replica 0. Records the bodies sent.
 */
function alternating(r: Awaited<ReturnType<typeof replicas>>, restartAt: number) {
  const bodies: any[] = [];
  let n = 0;
  const fetchImpl = async (input: RequestInfo | URL, init?: RequestInit) => {
    const call = n++;
    if (call === restartAt) await r.restart(0);
    const url = new URL(input instanceof Request ? input.url : String(input));
    const target = new URL(r.urls[call % 2]!);
    url.host = target.host;
    if (typeof init?.body === "string") bodies.push(JSON.parse(init.body));
    return fetch(url, init);
  };
  return { fetchImpl, bodies };
}

describe("Responses conversations across proxy replicas and a restart", () => {
  it("AI SDK openai(model): item_reference history resolves on the other replica and after a restart", async () => {
    const store = new InMemoryLightningStore({ watchdog: false });
    cleanup.push(() => store.close());
    const mock = await startMockLLMServer({ respond: addingModel });
    cleanup.push(() => mock.close());
    const r = await replicas(store, mock);
    const rollout = await store.startRollout({ input: {} });
    const { fetchImpl, bodies } = alternating(r, 2);
    const openai = createOpenAI({
      baseURL: `${r.urls[0]}/rollout/${rollout.rollout_id}/attempt/${rollout.attempt.attempt_id}/v1`,
      apiKey: "unused",
      fetch: fetchImpl as typeof fetch,
    });
    expect(await runAiSdkAgent(openai("policy"))).toEqual(["The sum is 42.", "The sum is 123."]);
    // the SDK names the first turn's answer by reference: made by replica 1, resolved by the restarted
    // replica 0 (call 3) and by replica 1 (call 4)
    expect(bodies.map((b) => b.input.map((i: any) => i.type ?? i.role))).toEqual([
      ["system", "user"],
      ["system", "user", "function_call", "function_call_output"],
      ["system", "user", "function_call", "function_call_output", "item_reference", "user"],
      [
        "system",
        "user",
        "function_call",
        "function_call_output",
        "item_reference",
        "user",
        "function_call",
        "function_call_output",
      ],
    ]);
    await r.flush();
    const spans = (await store.querySpans(rollout.rollout_id)).items.sort(
      (a, b) => a.sequence_id - b.sequence_id,
    );
    expect(spans.map((s) => s.attributes["agl.proxy.status"])).toEqual(["ok", "ok", "ok", "ok"]);
    // the last call carried the whole conversation: question, tool call, result, answer, next question...
    const last = mock.requests.filter((q) => q.path.endsWith("/chat/completions")).at(-1)!.body.messages;
    expect(last.map((m: any) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
      "assistant",
      "tool",
    ]);
    expect(last[4].content).toBe("The sum is 42.");
  });
});
