import { Worker } from "@agl/client";
import {
  emitAnnotation,
  emitMessage,
  emitReward,
  findFinalReward,
  InMemoryLightningStore,
  type LightningStore,
  type Logger,
  llm,
  rollout,
  silentLogger,
} from "@agl/core";
import { afterEach, describe, expect, it } from "vitest";
import { startPythonStoreServer } from "../../packages/client/src/test-support/python-agl/index.js";
import { serve } from "../store-http/support.js";

/**
 * A string an agent legitimately produced (tool output, model text) must never fail its attempt: a
 * Worker whose agent emits a message with U+0000 and a lone surrogate finishes the attempt `succeeded`
 * with every span stored (the text as U+FFFD, the span marked `agl.sanitized`) and no retries, against
 * agl-store and against the Python-protocol stand-in.
 */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const agent = rollout<{ n: number }>(async (task) => {
  emitMessage(`tool output ${task.n}: a\u0000b \udc00`);
  emitAnnotation({ [`key\u0000${task.n}`]: "v" });
  emitReward(task.n);
});

async function runWorker(url: string, store: LightningStore): Promise<string[]> {
  await store.addResources({ main_llm: llm({ endpoint: "http://unused/v1", model: "m" }) });
  const ids = (await store.enqueueManyRollouts([1, 2].map((n) => ({ input: { n } })))).map(
    (r) => r.rollout_id,
  );
  const warnings: string[] = [];
  const logger: Logger = { ...silentLogger, warn: (m: string) => warnings.push(m) };
  const worker = new Worker({
    store: url,
    agent,
    workerId: "w-nul",
    pollIntervalMs: 20,
    maxRollouts: ids.length,
    handleSignals: false,
    logger,
  });
  const summary = await worker.run();
  expect(summary).toMatchObject({ claimed: 2, succeeded: 2, failed: 0 });
  // Nothing was refused or retried.
  expect(warnings).toEqual([]);
  for (const [i, rid] of ids.entries()) {
    expect((await store.getRolloutById(rid))?.status).toBe("succeeded");
    const spans = (await store.querySpans(rid, { sortBy: "sequence_id" })).items;
    const message = spans.find((s) => s.name === "agentlightning.message")!;
    expect(message.attributes).toMatchObject({
      "agentlightning.message.body": `tool output ${i + 1}: a\uFFFDb \uFFFD`,
      "agl.sanitized": true,
    });
    expect(findFinalReward(spans)).toBe(i + 1);
    expect(JSON.stringify(spans)).not.toMatch(/\\u0000|\\ud[89a-f][0-9a-f]{2}/i);
  }
  return ids;
}

describe("a Worker whose agent emits text no store can hold", () => {
  it("against agl-store: the attempt succeeds, every span stored", async () => {
    const store = new InMemoryLightningStore();
    const server = await serve(store);
    closers.push(async () => {
      await server.close();
      await store.close();
    });
    await runWorker(server.url, store);
  });

  it("against the Python-protocol stand-in: the worker sends sanitised text, nothing refused", async () => {
    const python = await startPythonStoreServer();
    closers.push(python.close);
    const before = python.log.length;
    await runWorker(python.url, python.store);
    const refused = python.log
      .slice(before)
      .filter((l) => l.status >= 400 && !(l.path.endsWith("/batch") && l.status === 405));
    expect(refused).toEqual([]);
  });
});
