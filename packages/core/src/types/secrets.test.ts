import { afterEach, describe, expect, it } from "vitest";
import type { RolloutContext } from "../agent/types.js";
import { InvalidArgumentError } from "../errors.js";
import { type Logger, setLogger } from "../logger.js";
import { Runner } from "../runner/runner.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { LLMSchema, llm } from "./resources.js";

const KEY = "sk-test-0123456789abcdef";

function recording(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const push = (m: string, ...d: unknown[]) => void lines.push([m, ...d.map((x) => String(x))].join(" "));
  return { lines, logger: { debug: push, info: push, warn: push, error: push } };
}

afterEach(() => {
  setLogger(undefined);
  delete process.env.AGL_TEST_SECRET_KEY;
});

async function runWith(resource: ReturnType<typeof llm>, agent: (t: unknown, c: RolloutContext) => unknown) {
  const store = new InMemoryLightningStore();
  await store.addResources({ main: resource });
  const r = await store.enqueueRollout({ input: 1 });
  const { logger, lines } = recording();
  await new Runner({ store, agent, maxRollouts: 1, pollIntervalMs: 5, logger }).run();
  return { store, rolloutId: r.rollout_id, lines };
}

describe("secrets: api keys by reference", () => {
  it("api_key_env keeps the key out of the store; the worker resolves it from its environment", async () => {
    process.env.AGL_TEST_SECRET_KEY = KEY;
    let seen: string | null | undefined;
    const resource = llm({
      endpoint: "http://127.0.0.1:8000/v1",
      model: "m",
      api_key_env: "AGL_TEST_SECRET_KEY",
    });
    const { store, rolloutId } = await runWith(resource, (_t, { llm }) => {
      seen = llm?.api_key;
    });
    expect(seen).toBe(KEY);
    const stored = await store.getLatestResources();
    expect(JSON.stringify(stored)).not.toContain(KEY);
    expect(stored!.resources.main).toMatchObject({ api_key: null, api_key_env: "AGL_TEST_SECRET_KEY" });
    expect((await store.getRolloutById(rolloutId))!.status).toBe("succeeded");
  });

  it("a missing variable fails the attempt naming the variable; the key appears in no log or error", async () => {
    const resource = llm({
      endpoint: "http://127.0.0.1:8000/v1",
      model: "m",
      api_key_env: "AGL_TEST_SECRET_KEY",
    });
    const { store, rolloutId, lines } = await runWith(resource, () => 1);
    const attempt = (await store.getLatestAttempt(rolloutId))!;
    expect(attempt.status).toBe("failed");
    expect(String((attempt.metadata!.error as { message: string }).message)).toMatch(
      /environment variable AGL_TEST_SECRET_KEY is not set on this worker/,
    );
    // Now set, and the agent fails on purpose: the error path logs, but never the key.
    process.env.AGL_TEST_SECRET_KEY = KEY;
    const second = await runWith(resource, () => {
      throw new Error("agent broke");
    });
    const failed = (await second.store.getLatestAttempt(second.rolloutId))!;
    expect(failed.status).toBe("failed");
    expect([...lines, ...second.lines].join("\n")).not.toContain(KEY);
    expect(JSON.stringify(failed)).not.toContain(KEY);
  });

  it("a literal api_key still works (Python runners read it) but warns once", () => {
    const { logger, lines } = recording();
    setLogger(logger);
    const a = llm({ endpoint: "http://h/v1", model: "m", api_key: KEY });
    llm({ endpoint: "http://h/v1", model: "m", api_key: KEY });
    expect(a.api_key).toBe(KEY);
    const warnings = lines.filter((l) => l.includes("literal api_key"));
    expect(warnings).toHaveLength(1);
    expect(warnings.join("")).not.toContain(KEY);
    // The wire form of a Python-written resource parses unchanged.
    expect(
      LLMSchema.parse({ resource_type: "llm", endpoint: "http://h/v1", model: "m", api_key: "k" }),
    ).toEqual({
      resource_type: "llm",
      endpoint: "http://h/v1",
      model: "m",
      api_key: "k",
      sampling_parameters: {},
    });
  });
});

describe("llm() validates its endpoint", () => {
  it.each([
    ["localhost:8000/v1", /no http:\/\/ or https:\/\/ scheme; did you mean "http:\/\/localhost:8000\/v1"/],
    ["127.0.0.1:8000", /did you mean "http:\/\/127\.0\.0\.1:8000"/],
    ["ftp://h/v1", /not an http\(s\) URL/],
  ])("%s", (endpoint, message) => {
    try {
      llm({ endpoint, model: "m" });
      expect.unreachable();
    } catch (error) {
      expect(InvalidArgumentError.isInstance(error)).toBe(true);
      expect((error as InvalidArgumentError).field).toBe("llm.endpoint");
      expect((error as Error).message).toMatch(message);
    }
  });
});
