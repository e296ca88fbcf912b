import { InMemoryLightningStore, type LightningStore } from "@agl/core";
import { afterEach, describe, expect, it } from "vitest";
import { jsonLinesLogger } from "../logging.js";
import { type Harness, harness } from "./helpers.js";

const API = "/v1/agl";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A memory store whose statistics() is replaced, to make slow or broken handlers on demand. */
function storeWithStatistics(statistics: () => Promise<any>): LightningStore {
  const store = new InMemoryLightningStore();
  return Object.assign(store, { statistics });
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("bearer auth", () => {
  it("protects every route but health, compares the token, answers JSON 401", async () => {
    h = await harness({ token: "s3cret" });
    expect((await h.call("GET", `${API}/health`)).status).toBe(200);
    const none = await h.call("GET", `${API}/statistics`);
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ error_type: "Unauthorized" });
    expect(none.headers.get("www-authenticate")).toContain("Bearer");
    expect(
      (await h.call("GET", `${API}/statistics`, undefined, { authorization: "Bearer wrong" })).status,
    ).toBe(401);
    expect(
      (await h.call("GET", `${API}/statistics`, undefined, { authorization: "Bearer s3cretX" })).status,
    ).toBe(401);
    expect(
      (await h.call("GET", `${API}/statistics`, undefined, { authorization: "Bearer s3cret" })).status,
    ).toBe(200);
    expect((await h.call("GET", "/task")).status).toBe(401);
    expect((await h.call("POST", "/v1/traces", "", { "content-type": "application/json" })).status).toBe(401);
  });
});

describe("limits", () => {
  it("rejects bodies over the limit with 413, with or without a content-length", async () => {
    h = await harness({ bodyLimitBytes: 1024 });
    const big = { rollouts: [{ input: "x".repeat(2000) }] };
    const res = await h.call("POST", `${API}/queues/rollouts/enqueue`, big);
    expect(res.status).toBe(413);
    expect(res.body.error_type).toBe("PayloadTooLarge");
    const chunked = await fetch(`${h.server.url}${API}/queues/rollouts/enqueue`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(JSON.stringify(big)));
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(
      (await h.call("POST", `${API}/queues/rollouts/enqueue`, { rollouts: [{ input: 1 }] })).status,
    ).toBe(201);
  });

  it("answers 504 when a request outlives the per-request timeout", async () => {
    h = await harness({
      requestTimeoutMs: 150,
      store: storeWithStatistics(async () => {
        await sleep(5000);
        return {};
      }),
    });
    const started = Date.now();
    const res = await h.call("GET", `${API}/statistics`);
    expect(res.status).toBe(504);
    expect(Date.now() - started).toBeLessThan(4000);
  });

  it("a store bug is a 500 with the error type, and it is logged with its stack", async () => {
    const lines: string[] = [];
    h = await harness({
      logger: jsonLinesLogger((l) => lines.push(l)),
      store: storeWithStatistics(async () => {
        throw new TypeError("boom");
      }),
    });
    const res = await h.call("GET", `${API}/statistics`);
    expect(res).toMatchObject({
      status: 500,
      body: { detail: "Internal server error", error_type: "TypeError" },
    });
    const entries = lines.map((l) => JSON.parse(l));
    expect(entries.find((e) => e.msg === "unhandled error")).toMatchObject({
      level: "error",
      message: "boom",
    });
    expect(entries.find((e) => e.msg === "request" && e.path === `${API}/statistics`)).toMatchObject({
      method: "GET",
      status: 500,
    });
  });
});

describe("request logging", () => {
  it("answered requests at debug with method, path, status and duration; refusals at info", async () => {
    const lines: string[] = [];
    h = await harness({ logger: jsonLinesLogger((l) => lines.push(l), { level: "debug" }) });
    await h.call("GET", `${API}/health`);
    await h.call("GET", `${API}/rollouts?limit=0`);
    const requests = lines.map((l) => JSON.parse(l)).filter((e) => e.msg === "request");
    expect(requests).toHaveLength(2);
    expect(requests[0]).toMatchObject({ level: "debug", method: "GET", path: `${API}/health`, status: 200 });
    expect(requests[1]).toMatchObject({ level: "info", method: "GET", path: `${API}/rollouts`, status: 400 });
    expect(typeof requests[0].duration_ms).toBe("number");
    expect(typeof requests[0].ts).toBe("string");
  });

  it("at info: no line per answered request, a summary of them, every refusal still on its own line", async () => {
    const lines: string[] = [];
    h = await harness({ logger: jsonLinesLogger((l) => lines.push(l)), requestSummaryMs: 3_600_000 });
    for (let i = 0; i < 3; i++) await h.call("GET", `${API}/health`);
    await h.call("GET", `${API}/rollouts?limit=0`);
    let entries = lines.map((l) => JSON.parse(l));
    expect(entries.filter((e) => e.msg === "request")).toEqual([
      expect.objectContaining({ level: "info", status: 400, path: `${API}/rollouts` }),
    ]);
    expect(entries.filter((e) => e.msg === "requests")).toEqual([]);
    await h.server.close();
    entries = lines.map((l) => JSON.parse(l));
    const summaries = entries.filter((e) => e.msg === "requests");
    expect(summaries).toHaveLength(1);
    expect(summaries[0]).toMatchObject({ level: "info", count: 4, statuses: { "200": 3, "400": 1 } });
    expect(summaries[0].max_ms).toBeGreaterThanOrEqual(summaries[0].mean_ms);
    // The summary comes before the closing line.
    expect(entries.findIndex((e) => e.msg === "requests")).toBeLessThan(
      entries.findIndex((e) => e.msg === "store server closed"),
    );
  });
});

describe("graceful shutdown", () => {
  it("finishes in-flight requests, ends long waits early, then refuses connections", async () => {
    h = await harness({
      store: storeWithStatistics(async () => {
        await sleep(300);
        return { name: "slow" };
      }),
    });
    const url = h.server.url;
    const rollout = (await h.call("POST", `${API}/rollouts`, { input: 1 })).body;
    const inflight = h.call("GET", `${API}/statistics`);
    const wait = h.call("POST", `${API}/waits/rollouts`, { rollout_ids: [rollout.rollout_id], timeout: 15 });
    await sleep(50);
    const started = Date.now();
    await h.server.close();
    expect(Date.now() - started).toBeLessThan(3000);
    expect(await inflight).toMatchObject({ status: 200, body: { name: "slow" } });
    expect(await wait).toMatchObject({ status: 200, body: [] });
    await expect(fetch(`${url}${API}/health`)).rejects.toThrow();
    await h.store.close();
    h = undefined;
  });
});

describe("startup", () => {
  it("rejects when the port is taken", async () => {
    h = await harness();
    const store = new InMemoryLightningStore();
    await expect(harness({ store, port: h.server.port })).rejects.toThrow(/EADDRINUSE/);
    await store.close();
  });
});
