import { ProxySpansToTriplets } from "@agl/adapter";
import { SpanSchema } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { afterAll, describe, expect, it } from "vitest";
import {
  startPythonLLMProxy,
  startPythonStoreServer,
} from "../../packages/client/src/test-support/python-agl/index.js";
import { type Child, spawnWorker, waitForStderr } from "../store-http/processes.js";

/**
 * The other direction of interop: Python Agent Lightning trains (its store server and LLM proxy, here
 * stand-ins that answer exactly as they do), TypeScript agents run in agl-worker processes. The
 * "trainer" below speaks to the store the way the Python client and VERL's daemon do: add a ProxyLLM
 * resource, enqueue each sample with a data_id, poll waits with timeout 0, read spans of the latest
 * attempt.
 */

const children: Child[] = [];
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
  for (const close of closers.reverse()) await close();
});

describe("agl-worker against a Python Agent Lightning store server and LLM proxy", () => {
  it("runs TypeScript agents whose LLM calls go through the Python proxy's per-attempt URL", async () => {
    const store = await startPythonStoreServer();
    closers.push(store.close);
    const llmServer = await startMockLLMServer({ port: 0 });
    closers.push(llmServer.close);
    const proxy = await startPythonLLMProxy({ storeUrl: store.url, upstream: llmServer.url });
    closers.push(proxy.close);
    const agl = async (method: "GET" | "POST", path: string, body?: unknown) => {
      const res = await fetch(`${store.url}/v1/agl/${path}`, {
        method,
        headers: { "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      expect(res.status, `${method} ${path}`).toBeLessThan(300);
      return res.json();
    };

    // The Python trainer's side: LLMProxy.as_resource() (no /v1) and VERL-style enqueues.
    await agl("POST", "resources", {
      main_llm: {
        resource_type: "proxy_llm",
        endpoint: proxy.url,
        model: "policy",
        api_key: null,
        sampling_parameters: { temperature: 1 },
      },
    });
    const questions = Array.from({ length: 6 }, (_, i) => `what is ${i} + ${i}?`);
    const enqueued = await agl("POST", "queues/rollouts/enqueue", {
      rollouts: questions.map((question, i) => ({
        input: { question },
        mode: "train",
        resources_id: null,
        config: { timeout_seconds: 1200, unresponsive_seconds: 1200, max_attempts: 1, retry_condition: [] },
        metadata: { data_id: `sample-${i >> 1}`, is_train: true },
      })),
    });
    const ids: string[] = enqueued.map((r: { rollout_id: string }) => r.rollout_id);

    for (let w = 0; w < 2; w++) {
      children.push(
        spawnWorker(store.url, "test/python-interop/fixtures/echo-agent.ts", [
          "--worker-id",
          `ts-worker-${w}`,
          "--poll-interval-ms",
          "100",
          "--concurrency",
          "2",
        ]),
      );
    }
    // Generous: two worker processes must start (tsx) before anything runs; a loaded machine is slow.
    const deadline = Date.now() + 240_000;
    let finished: Array<{ rollout_id: string; status: string }> = [];
    while (finished.length < ids.length && Date.now() < deadline) {
      finished = await agl("POST", "waits/rollouts", { rollout_ids: ids, timeout: 0 });
      if (finished.length < ids.length) await new Promise((r) => setTimeout(r, 200));
    }
    const logs = children.map((c) => c.stderr()).join("\n");
    expect(
      finished.map((r) => r.status),
      logs,
    ).toEqual(ids.map(() => "succeeded"));

    // Each worker said which server it was talking to. One worker may have run every rollout before the
    // other finished starting, so wait for each one's line (also: SIGTERM below must not hit a worker
    // still loading, before its handler is installed).
    for (const c of children) {
      await waitForStderr(
        c,
        /store http:\/\/127\.0\.0\.1:\d+ is an Agent Lightning store server \(InMemoryLightningStore\), not agl-ts/,
      );
    }
    // Every agent call reached the proxy at its own attempt's URL, in LiteLLM's path form.
    const attempts = new Map<string, string>();
    for (const id of ids) attempts.set(id, (await agl("GET", `rollouts/${id}/attempts/latest`)).attempt_id);
    expect(proxy.calls).toHaveLength(ids.length);
    for (const call of proxy.calls) {
      expect(call.status).toBe(200);
      expect(call.path).toBe(
        `/rollout/${call.rolloutId}/attempt/${attempts.get(call.rolloutId!)}/chat/completions`,
      );
    }
    expect(new Set(proxy.calls.map((c) => c.rolloutId))).toEqual(new Set(ids));

    // What the Python trainer reads back: the proxy's LLM span and the agent's reward, per rollout,
    // in the shapes its adapters expect (and that agl-ts's own adapter turns into triplets as well).
    const adapter = new ProxySpansToTriplets();
    for (const id of ids) {
      const page = await agl("POST", "spans/search", { rollout_id: id, attempt_id: "latest" });
      const names = page.items.map((s: { name: string }) => s.name);
      expect(names).toContain("raw_gen_ai_request");
      const reward = page.items.find(
        (s: { attributes: Record<string, unknown> }) => "agentlightning.reward.0.value" in s.attributes,
      );
      expect(reward?.attributes["agentlightning.reward.0.value"]).toBe(1);
      const triplets = adapter.adapt(page.items.map((s: unknown) => SpanSchema.parse(s)));
      expect(triplets).toHaveLength(1);
      expect(triplets[0]!.reward).toBe(1);
      expect(triplets[0]!.response.token_ids.length).toBeGreaterThan(0);
    }
    // Only the batch-route probes were refused; nothing the workers sent was malformed.
    const refused = store.log.filter(
      (l) => l.status >= 400 && !(l.path.endsWith("/batch") && l.status === 405),
    );
    expect(refused).toEqual([]);

    for (const c of children) c.proc.kill("SIGTERM");
    expect(await Promise.all(children.map((c) => c.exited))).toEqual([0, 0]);
  }, 300_000);
});
