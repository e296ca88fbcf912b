import { InMemoryLightningStore } from "@agl/core";
import { type MockLLMServer, type MockRequestInfo, startMockLLMServer } from "@agl/core/mock-llm";
import { LLMProxy } from "@agl/proxy";

/**
 * The stand-in for vLLM serving a policy model: asked to add two numbers, it calls the `add` tool, and
 * once the tool's result is in the conversation it answers with it. It sees what vLLM would see: the
 * proxy's chat/completions calls, whatever API the agent spoke.
 */
export function addingModel(request: MockRequestInfo) {
  const messages: any[] = request.body?.messages ?? [];
  const last = messages.at(-1);
  if (last?.role === "tool") return { content: `The sum is ${last.content}.` };
  const question = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "");
  const numbers = question.match(/-?\d+/g);
  if (request.body?.tools && numbers && numbers.length >= 2) {
    const [a, b] = numbers.map(Number);
    return { content: null, tool_calls: [{ name: "add", arguments: JSON.stringify({ a, b }) }] };
  }
  return { content: `You said: ${question}` };
}

export interface ExampleSetup {
  store: InMemoryLightningStore;
  mock: MockLLMServer;
  proxy: LLMProxy;
  /** A new rollout attempt and the base URL (without /v1) its agent talks to. */
  attempt(): Promise<{ rolloutId: string; attemptId: string; base: string }>;
  close(): Promise<void>;
}

/** A policy "engine" (the mock), the proxy in front of it and a store for the spans. */
export async function startExample(): Promise<ExampleSetup> {
  const store = new InMemoryLightningStore({ watchdog: false });
  const mock = await startMockLLMServer({ respond: addingModel });
  const proxy = new LLMProxy({
    store,
    backends: [{ url: mock.baseURL }],
    model: "policy",
    healthCheckIntervalMs: 0,
    logger: { warn: () => {}, error: (m) => console.error(m) },
  });
  const url = await proxy.start();
  return {
    store,
    mock,
    proxy,
    async attempt() {
      const r = await store.startRollout({ input: { task: "add" } });
      const rolloutId = r.rollout_id;
      const attemptId = r.attempt.attempt_id;
      return { rolloutId, attemptId, base: `${url}/rollout/${rolloutId}/attempt/${attemptId}` };
    },
    async close() {
      await proxy.stop();
      await mock.close();
      await store.close();
    },
  };
}
