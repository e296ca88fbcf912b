/**
 * The HTTP side of the dashboard: agl-store serving the page without the token while the API (and the
 * metrics log) stay behind it, and agl-dashboard's standalone server forwarding read-only calls only.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore } from "@agl/core";
import { createDashboardApp, isReadOnlyCall, READ_ROUTES, startDashboardServer } from "@agl/dashboard";
import { createStoreApp, startStoreServer } from "@agl/store";
import { afterAll, describe, expect, it } from "vitest";
import { bearerMatches } from "../../packages/store/src/dashboard-loader.js";

const TOKEN = "tok-123";
const quiet = { info() {}, warn() {}, error() {} };
// The page's three files (stand-ins: these tests are about HTTP, the browser tests use the real build).
const dir = mkdtempSync(join(tmpdir(), "agl-dashboard-http-"));
writeFileSync(join(dir, "index.html"), "<!doctype html><title>agl</title>");
writeFileSync(join(dir, "app.js"), "console.log(1)");
writeFileSync(join(dir, "app.css"), "body{}");
const metricsFile = join(dir, "metrics.jsonl");
writeFileSync(metricsFile, '{"step":1,"training/reward":0.5}\n');
afterAll(() => rm(dir, { recursive: true, force: true }));

const auth = { authorization: `Bearer ${TOKEN}` };

describe("agl-store with the dashboard mounted", () => {
  const store = new InMemoryLightningStore({ watchdog: false });
  const app = createStoreApp(store, {
    token: TOKEN,
    logger: quiet,
    dashboard: createDashboardApp({
      assetsDir: dir,
      metricsFile,
      authorize: (h) => bearerMatches(TOKEN, h),
    }),
  });

  it("serves the page without the token, with the right types, and redirects / to it", async () => {
    const page = await app.request("/dashboard/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    expect(await page.text()).toContain("<title>agl</title>");
    expect((await app.request("/dashboard/app.js")).headers.get("content-type")).toContain("javascript");
    expect((await app.request("/dashboard/app.css")).headers.get("content-type")).toContain("text/css");
    const root = await app.request("/");
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/dashboard/");
    expect((await app.request("/dashboard")).headers.get("location")).toBe("/dashboard/");
    expect((await app.request("/dashboard/../v1/agl/statistics")).status).not.toBe(200);
    expect((await app.request("/dashboard/secrets.txt")).status).toBe(404);
  });

  it("keeps the API and the metrics log behind the store's token", async () => {
    expect((await app.request("/v1/agl/statistics")).status).toBe(401);
    expect((await app.request("/v1/agl/statistics", { headers: auth })).status).toBe(200);
    expect((await app.request("/dashboard/metrics.jsonl")).status).toBe(401);
    expect(
      (await app.request("/dashboard/metrics.jsonl", { headers: { authorization: "Bearer nope" } })).status,
    ).toBe(401);
    const metrics = await app.request("/dashboard/metrics.jsonl", { headers: auth });
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('"training/reward":0.5');
    // a POST under /dashboard is not public either
    expect((await app.request("/dashboard/", { method: "POST" })).status).toBe(401);
  });

  it("without a dashboard, /dashboard is just another route behind the token", async () => {
    const plain = createStoreApp(store, { token: TOKEN, logger: quiet });
    expect((await plain.request("/dashboard/")).status).toBe(401);
    expect((await plain.request("/dashboard/", { headers: auth })).status).toBe(404);
  });

  it("bearerMatches compares the whole token", () => {
    expect(bearerMatches(TOKEN, `Bearer ${TOKEN}`)).toBe(true);
    expect(bearerMatches(TOKEN, `bearer ${TOKEN}`)).toBe(true);
    expect(bearerMatches(TOKEN, `Bearer ${TOKEN}x`)).toBe(false);
    expect(bearerMatches(TOKEN, TOKEN)).toBe(false);
    expect(bearerMatches(TOKEN, undefined)).toBe(false);
    expect(bearerMatches(null, undefined)).toBe(true);
  });

  it("a missing metrics file is a 404 that names the option, not a 500", async () => {
    const none = createDashboardApp({ assetsDir: dir });
    const r = await none.request("/metrics.jsonl");
    expect(r.status).toBe(404);
    expect(await r.json()).toMatchObject({ detail: expect.stringContaining("--metrics") });
    const gone = createDashboardApp({ assetsDir: dir, metricsFile: join(dir, "not-there.jsonl") });
    expect((await gone.request("/metrics.jsonl")).status).toBe(404);
  });
});

describe("agl-dashboard standalone", () => {
  it("forwards read-only calls with the caller's token, refuses writes, and reports an unreachable store", async () => {
    const store = new InMemoryLightningStore({ watchdog: false });
    const storeServer = await startStoreServer({ store, port: 0, token: TOKEN, logger: quiet });
    const dash = await startDashboardServer({
      storeUrl: `${storeServer.url}/v1/agl/`,
      port: 0,
      assetsDir: dir,
      metricsFile,
    });
    const dead = await startDashboardServer({ storeUrl: "http://127.0.0.1:9", port: 0, assetsDir: dir });
    const base = dash.url.replace(/\/dashboard\/$/, "");
    try {
      await store.enqueueRollout({ input: { q: 1 } });
      expect((await fetch(`${base}/v1/agl/statistics`)).status).toBe(401);
      const search = await fetch(`${base}/v1/agl/rollouts/search`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ limit: 10, offset: 0 }),
      });
      expect(search.status).toBe(200);
      expect((await search.json()) as { total: number }).toMatchObject({ total: 1 });
      const write = await fetch(`${base}/v1/agl/queues/rollouts/enqueue`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ rollouts: [{ input: {} }] }),
      });
      expect(write.status).toBe(405);
      expect((await store.queryRollouts({})).total).toBe(1);
      const big = await fetch(`${base}/v1/agl/rollouts/search`, {
        method: "POST",
        headers: auth,
        body: "x".repeat(2 * 1024 * 1024),
      });
      expect(big.status).toBe(413);
      // the metrics log needs a token the store accepts
      expect((await fetch(`${base}/dashboard/metrics.jsonl`)).status).toBe(401);
      expect((await fetch(`${base}/dashboard/metrics.jsonl`, { headers: auth })).status).toBe(200);
      expect((await fetch(`${base}/dashboard/`)).status).toBe(200);

      const deadBase = dead.url.replace(/\/dashboard\/$/, "");
      const unreachable = await fetch(`${deadBase}/v1/agl/statistics`);
      expect(unreachable.status).toBe(502);
      expect(await unreachable.json()).toMatchObject({ error_type: "BadGateway" });
    } finally {
      await dash.close();
      await dead.close();
      await storeServer.close();
      await store.close();
    }
  });
  it("forwards only the listed read routes: no write reaches the store, however its path is spelled", async () => {
    const store = new InMemoryLightningStore({ watchdog: false });
    const storeServer = await startStoreServer({ store, port: 0, token: TOKEN, logger: quiet });
    const dash = await startDashboardServer({ storeUrl: storeServer.url, port: 0, assetsDir: dir });
    const base = dash.url.replace(/\/dashboard\/$/, "");
    const r = await store.startRollout({ input: 1 });
    const rid = r.rollout_id;
    const aid = r.attempt.attempt_id;
    const named = { p: { resource_type: "prompt_template", template: "evil", engine: "f-string" } };
    // Every store write, including those whose path ends in /search or names a read route's segment.
    const writes: Array<[string, unknown]> = [
      ["/v1/agl/resources/search", named],
      ["/v1/agl/resources/latest", named],
      ["/v1/agl/resources", named],
      ["/v1/agl/resources/rs-x", named],
      ["/v1/agl/resources/search/", named],
      ["/v1/agl/resources//search", named],
      ["/v1/agl/rollouts/search/../../resources/search", named],
      ["/v1/agl/rollouts/x/%2e%2e/%2e%2e/resources/search", named],
      ["/v1/agl/resources%2Fsearch", named],
      ["/v1/agl/queues/rollouts/enqueue", { rollouts: [{ input: {} }] }],
      ["/v1/agl/queues/rollouts/dequeue", { limit: 1 }],
      ["/v1/agl/rollouts", { input: 2 }],
      [`/v1/agl/rollouts/${rid}`, { status: "cancelled" }],
      [`/v1/agl/rollouts/${rid}/attempts`, {}],
      [`/v1/agl/rollouts/${rid}/attempts/${aid}`, { status: "failed" }],
      [`/v1/agl/rollouts/${rid}/attempts/latest`, { status: "failed" }],
      ["/v1/agl/spans", {}],
      ["/v1/agl/spans/batch", { spans: [] }],
      ["/v1/agl/spans/next", { rollout_id: rid, attempt_id: aid }],
      ["/v1/agl/spans/next/batch", { pairs: [{ rollout_id: rid, attempt_id: aid }] }],
      ["/v1/agl/workers/w1", { heartbeat_stats: {} }],
      ["/v1/agl/waits/rollouts", { rollout_ids: [rid], timeout: 0 }],
    ];
    try {
      for (const [path, body] of writes) {
        const answer = await fetch(`${base}${path}`, {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        expect(answer.status, `POST ${path}`).toBe(405);
        await answer.body?.cancel();
        for (const method of ["PUT", "PATCH", "DELETE"]) {
          const other = await fetch(`${base}${path}`, { method, headers: auth });
          expect(other.status, `${method} ${path}`).toBe(405);
          await other.body?.cancel();
        }
      }
      expect(await store.getLatestResources()).toBeNull();
      expect((await store.queryResources()).total).toBe(0);
      expect((await store.queryRollouts({})).total).toBe(1);
      expect((await store.getRolloutById(rid))?.status).toBe("preparing");
      expect((await store.queryWorkers({})).total).toBe(0);
      expect(await store.getNextSpanSequenceId(rid, aid)).toBe(1);

      // The read routes the page uses still go through, ids with reserved characters included.
      const odd = "ro/../x?y#z";
      const reads: Array<[string, string, unknown?]> = [
        ["GET", "/v1/agl/health"],
        ["GET", "/v1/agl/statistics"],
        ["POST", "/v1/agl/rollouts/search", { limit: 5, offset: 0 }],
        ["GET", `/v1/agl/rollouts/${rid}`],
        ["GET", `/v1/agl/rollouts/${encodeURIComponent(odd)}`],
        ["POST", `/v1/agl/rollouts/${rid}/attempts/search`, { limit: -1, offset: 0 }],
        ["POST", "/v1/agl/spans/search", { rollout_id: rid }],
        ["GET", "/v1/agl/resources?limit=5&offset=0"],
        ["POST", "/v1/agl/workers/search", { limit: 5, offset: 0 }],
      ];
      for (const [method, path, body] of reads) {
        const answer = await fetch(`${base}${path}`, {
          method,
          headers: { ...auth, ...(body ? { "content-type": "application/json" } : {}) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        expect(answer.status, `${method} ${path}`).toBe(200);
        await answer.body?.cancel();
      }
      const got = await fetch(`${base}/v1/agl/rollouts/${rid}`, { headers: auth });
      expect(((await got.json()) as { rollout_id: string }).rollout_id).toBe(rid);
    } finally {
      await dash.close();
      await storeServer.close();
      await store.close();
    }
  });

  it("the allow-list is exact: method and whole pattern", () => {
    expect(isReadOnlyCall("POST", "/v1/agl/rollouts/search")).toBe(true);
    expect(isReadOnlyCall("POST", "/v1/agl/resources/search")).toBe(false);
    expect(isReadOnlyCall("POST", "/v1/agl/rollouts/r1/attempts/search")).toBe(true);
    expect(isReadOnlyCall("POST", "/v1/agl/rollouts/r1/attempts/a1")).toBe(false);
    expect(isReadOnlyCall("POST", "/v1/agl/rollouts/r1")).toBe(false);
    expect(isReadOnlyCall("GET", "/v1/agl/rollouts/r1")).toBe(true);
    expect(isReadOnlyCall("GET", "/v1/agl/rollouts/r1/x")).toBe(false);
    expect(isReadOnlyCall("GET", "/v1/agl/rollouts//")).toBe(false);
    expect(isReadOnlyCall("HEAD", "/v1/agl/health")).toBe(false);
    expect(isReadOnlyCall("GET", "/v1/agl/rollouts/%E0%A4%A")).toBe(false);
    for (const [method, pattern] of READ_ROUTES) {
      expect(isReadOnlyCall(method, pattern.replaceAll(/:\w+/g, "id-1"))).toBe(true);
      if (method === "GET") expect(isReadOnlyCall("POST", pattern.replaceAll(/:\w+/g, "id-1"))).toBe(false);
    }
  });
});
