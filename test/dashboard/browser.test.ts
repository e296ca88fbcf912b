/**
 * The dashboard in a real headless Chromium against a real store server (SQLite) holding a real agent
 * run through the LLM proxy (see seed.ts): login on 401, rollouts table with server-side paging,
 * filters and search, a rollout's messages, tool calls and triplet tokens, resources without keys,
 * workers, training curves, the unreachable and no-spans states (other stores:
 * browser-other-stores.test.ts). Screenshots go to .screenshots/dashboard/ (git-ignored).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LightningStore } from "@agl/core";
import { mockEncode } from "@agl/core/mock-llm";
import { createDashboardApp, startDashboardServer } from "@agl/dashboard";
import { openStore, type StoreServer, startStoreServer } from "@agl/store";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildDashboardAssets } from "../../packages/dashboard/src/build/build-assets.js";
import { cspViolations, launchChromium, screenshot, TrackedPages } from "./browser-support.js";
import {
  CHAT_QUESTION,
  REACT_OBSERVATION,
  SEED_API_KEY,
  SEED_TASKS,
  type SeedSummary,
  seedStore,
} from "./seed.js";

const TOKEN = "s3cret-dashboard-token";
const QUEUED = 60;
const METRIC_STEPS = 12;
const quiet = { info() {}, warn() {}, error() {} };

let dir: string;
let assetsDir: string;
let store: LightningStore;
let server: StoreServer;
let browser: Browser;
let seed: SeedSummary;
const pages = new TrackedPages();
const page = (token: string | null = TOKEN): Promise<Page> => pages.open(browser, token);

const rowIds = (p: Page) =>
  p.getByTestId("rollout-row").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-rollout-id")));

async function rolloutIdOf(style: string, a: number): Promise<string> {
  const all = await store.queryRollouts({});
  const r = all.items.find(
    (x) => (x.input as { style?: string; a?: number }).style === style && (x.input as { a?: number }).a === a,
  );
  return r!.rollout_id;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agl-dashboard-"));
  assetsDir = join(dir, "assets");
  await buildDashboardAssets({ outDir: assetsDir });
  store = await openStore(`sqlite:${join(dir, "agl.db")}`);
  seed = await seedStore(store, { queued: QUEUED });
  const metricsFile = join(dir, "metrics.jsonl");
  await writeFile(
    metricsFile,
    Array.from({ length: METRIC_STEPS }, (_, step) =>
      JSON.stringify({
        step,
        "training/reward": step / METRIC_STEPS,
        "val/reward": step / (2 * METRIC_STEPS),
        "actor/pg_loss": -step / 100,
        // Nearly flat: uPlot's own tick labels all read "4.676" for this.
        "actor/entropy": 4.6761 + step * 0.00001,
      }),
    ).join("\n"),
  );
  server = await startStoreServer({
    store,
    port: 0,
    token: TOKEN,
    logger: quiet,
    dashboard: createDashboardApp({
      assetsDir,
      metricsFile,
      authorize: (authorization) => authorization === `Bearer ${TOKEN}`,
    }),
  });
  browser = await launchChromium();
});

afterAll(async () => {
  pages.expectClean();
  await browser?.close();
  await server?.close();
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("dashboard served by agl-store", () => {
  it("loads under its Content-Security-Policy without a single violation (zod runs jitless)", async () => {
    const p = await page();
    const response = await p.goto(`${server.url}/dashboard/`);
    const policy = response!.headers()["content-security-policy"]!;
    expect(policy).toContain("base-uri 'none'");
    expect(policy).toContain("form-action 'none'");
    expect(policy).not.toContain("unsafe-eval");
    await p.getByTestId("rollouts-table").waitFor();
    // A rollout's page shapes its spans (zod parses there too).
    await p.goto(`${server.url}/dashboard/#/rollouts/${await rolloutIdOf("chat", SEED_TASKS[0]!.a)}`);
    await p.getByTestId("span-tree").waitFor();
    expect(cspViolations.get(p)).toEqual([]);
  });

  it("asks for the token on a 401, rejects a wrong one, then shows the rollouts", async () => {
    const p = await page(null);
    await p.goto(`${server.url}/`);
    await p.getByTestId("login").waitFor();
    await screenshot(p, "01-login");
    await p.getByTestId("login-token").fill("wrong");
    await p.getByTestId("login-submit").click();
    await expect(p.getByTestId("login-error").textContent()).resolves.toContain("Invalid bearer token");
    await p.getByTestId("login-token").fill(TOKEN);
    await p.getByTestId("login-submit").click();
    await p.getByTestId("rollouts-table").waitFor();
    const total = seed.agentRollouts + seed.queuedRollouts + 1;
    await expect(p.getByTestId("page-info").textContent()).resolves.toBe(`page 1 of 2 · ${total} total`);
    expect(await p.getByTestId("rollout-row").count()).toBe(50);
  });

  it("pages on the server, sorts, searches by id, filters status, mode and data id over the whole store", async () => {
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/rollouts`);
    await p.getByTestId("rollouts-table").waitFor();
    const first = await rowIds(p);
    await p.getByRole("button", { name: "Next ›" }).click();
    await p.getByText("page 2 of 2").waitFor();
    const second = await rowIds(p);
    expect(second).toHaveLength(16);
    expect(second.filter((id) => first.includes(id))).toEqual([]);

    await p.getByTestId("status-succeeded").click();
    await p.getByText("page 1 of 1 · 5 total").waitFor();
    const statuses = await p.getByTestId("rollout-row").locator(".badge").allTextContents();
    expect(statuses).toEqual(Array(5).fill("succeeded"));
    // the rewards of the visible rows are read from their reward spans
    await p.waitForFunction(
      () => !Array.from(document.querySelectorAll("[data-testid=reward]")).some((e) => e.textContent === "…"),
    );
    expect((await p.getByTestId("reward").allTextContents()).sort()).toEqual(["1", "1", "1", "1", "–"]);
    await screenshot(p, "02-rollouts-succeeded");

    await p.getByTestId("status-succeeded").click();
    await p.getByTestId("status-failed").click();
    await p.getByText("page 1 of 1 · 1 total").waitFor();
    const failed = await rolloutIdOf("crash", 1);
    expect(await rowIds(p)).toEqual([failed]);

    await p.getByTestId("status-failed").click();
    await p.getByTestId("search").fill(seed.emptyRolloutId.slice(3, 10));
    await p.getByTestId("search").press("Enter");
    await p.getByText("page 1 of 1 · 1 total").waitFor();
    expect(await rowIds(p)).toEqual([seed.emptyRolloutId]);

    await p.goto(`${server.url}/dashboard/#/rollouts?sort=rollout_id&order=asc`);
    await p.getByTestId("rollouts-table").waitFor();
    const sorted = await rowIds(p);
    expect(sorted).toEqual([...sorted].sort());

    // An agl-ts store filters mode and data id itself: paging and counts cover the whole store.
    const all = (await store.queryRollouts({})).items;
    const val = all.filter((r) => r.mode === "val");
    const valSample3 = val.filter((r) => String(r.metadata?.data_id ?? "").includes("sample-3"));
    expect(val.length).toBeGreaterThan(50);
    expect(valSample3.length).toBeGreaterThan(1);
    const modeCells = () => p.locator("[data-testid=rollout-row] td:nth-child(3)").allTextContents();
    const dataCells = () => p.locator("[data-testid=rollout-row] td:nth-child(9)").allTextContents();
    await expect(p.getByTestId("mode-filter").locator("option").first().textContent()).resolves.toBe(
      "any mode",
    );
    await p.getByTestId("mode-filter").selectOption("val");
    await p.getByText(`page 1 of 2 · ${val.length} total`).waitFor();
    expect(await p.getByTestId("rollout-row").count()).toBe(50);
    expect(new Set(await modeCells())).toEqual(new Set(["val"]));
    await p.getByRole("button", { name: "Next ›" }).click();
    await p.getByText(`page 2 of 2 · ${val.length} total`).waitFor();
    expect(await p.getByTestId("rollout-row").count()).toBe(val.length - 50);
    expect(new Set(await modeCells())).toEqual(new Set(["val"]));
    await p.getByTestId("data-filter").fill("sample-3");
    // Half-typed text survives the page's background refresh (every 5 s) until it is committed.
    await p.waitForTimeout(5500);
    await expect(p.getByTestId("data-filter").inputValue()).resolves.toBe("sample-3");
    await p.getByTestId("data-filter").press("Tab");
    await p.getByText(`page 1 of 1 · ${valSample3.length} total`).waitFor();
    expect((await rowIds(p)).sort()).toEqual(valSample3.map((r) => r.rollout_id).sort());
    expect(new Set(await dataCells())).toEqual(new Set(valSample3.map((r) => r.metadata?.data_id)));
    expect(await p.getByTestId("page-filter-note").count()).toBe(0);
    await p.getByTestId("data-filter").fill("no-such-sample");
    await p.getByTestId("data-filter").press("Tab");
    await p.getByTestId("state-no-match").waitFor();
    await screenshot(p, "02b-rollouts-no-match");
  });

  it("shows a chat rollout's attempt, reward, messages, tool call and the triplet's exact token ids", async () => {
    const task = SEED_TASKS[0]!;
    const id = await rolloutIdOf("chat", task.a);
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/rollouts/${id}`);
    await p.getByTestId("span-tree").waitFor();
    expect(await p.getByTestId("attempt-row").count()).toBe(1);
    await expect(p.getByTestId("attempt-row").textContent()).resolves.toMatch(/Worker-\d/);
    await expect(p.getByTestId("reward-value").allTextContents()).resolves.toEqual(["1"]);
    expect(await p.getByTestId("span-row").count()).toBe((await store.querySpans(id)).items.length);
    await screenshot(p, "03-rollout-spans");

    await p.getByTestId("tab-calls").click();
    expect(await p.getByTestId("llm-call").count()).toBe(4);
    expect(await p.getByTestId("dropped").count()).toBe(2);
    await expect(p.getByTestId("llm-calls").textContent()).resolves.toContain(CHAT_QUESTION(task));
    await expect(p.getByTestId("tool-calls").first().textContent()).resolves.toContain(
      `calculator({"a":${task.a},"b":${task.b}})`,
    );
    await screenshot(p, "04-rollout-calls");

    await p.getByTestId("tab-triplets").click();
    expect(await p.getByTestId("triplet").count()).toBe(2);
    const answerIds = await p.getByTestId("triplet-tokens").nth(1).locator(".tok-response").allTextContents();
    expect(answerIds.map(Number)).toEqual(mockEncode(`The answer is ${task.a + task.b}.`));
    await expect(
      p.getByTestId("diagnostic").evaluateAll((els) => els.map((e) => e.getAttribute("data-code"))),
    ).resolves.toContain("prefix_mismatch");
    await screenshot(p, "05-rollout-triplets");
  });

  it("shows a ReAct rollout's training row with the observation tokens masked out", async () => {
    const task = SEED_TASKS[1]!;
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/rollouts/${await rolloutIdOf("react", task.a)}`);
    await p.getByTestId("tab-triplets").click();
    const row = p.getByTestId("sequence-tokens");
    expect(await p.getByTestId("sequence").count()).toBe(1);
    const observed = await row
      .locator(".tok-observation")
      .evaluateAll((els) => els.map((e) => [Number(e.textContent), e.getAttribute("data-mask")]));
    expect(observed).toEqual(mockEncode(REACT_OBSERVATION(task.a + task.b)).map((id) => [id, "0"]));
    await expect(p.getByTestId("sequence-counts").textContent()).resolves.toContain(
      `${REACT_OBSERVATION(task.a + task.b).length} observation`,
    );
    await screenshot(p, "06-rollout-observation-mask");
  });

  it("says so when a rollout has no spans, or does not exist", async () => {
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/rollouts/${seed.emptyRolloutId}`);
    await p.getByTestId("state-no-spans").waitFor();
    await screenshot(p, "07-no-spans");
    await p.goto(`${server.url}/dashboard/#/rollouts/ro-doesnotexist`);
    await p.getByTestId("state-not-found").waitFor();
  });

  it("lists resource versions with diffs and never shows the API key", async () => {
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/resources`);
    await p.getByTestId("page-resources").waitFor();
    expect(await p.getByTestId("resource-version").count()).toBe(2);
    const text = (await p.textContent("body")) ?? "";
    expect(text).not.toContain(SEED_API_KEY);
    expect(text).toContain("policy-v2 @ http://127.0.0.1:9/v1");
    const added = await p.locator(".diff-added").allTextContents();
    expect(added).toContain("+ Show the tool result.");
    await screenshot(p, "08-resources");
  });

  it("lists the workers with their heartbeat age", async () => {
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/workers`);
    await p.getByTestId("workers-table").waitFor();
    const names = await p.locator("[data-testid=worker-row] td:first-child").allTextContents();
    expect(names.sort()).toEqual(["Worker-0", "Worker-1"]);
    await screenshot(p, "09-workers");
  });

  it("draws the training curves from the metrics file, one point per step", async () => {
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/training`);
    const main = p.getByTestId("chart-main");
    await main.locator("canvas").waitFor();
    await expect(main.getAttribute("data-points")).resolves.toBe(`${METRIC_STEPS},${METRIC_STEPS}`);
    await expect(main.locator(".u-legend").textContent()).resolves.toContain("training/reward");
    expect(await p.getByTestId("chart-actor/pg_loss").count()).toBe(1);
    // Step ticks are integers; a nearly flat series has distinct y tick labels.
    const xTicks = (await main.getAttribute("data-x-ticks"))!.split("|");
    expect(xTicks.length).toBeGreaterThan(1);
    for (const t of xTicks) expect(t).toMatch(/^\d+$/);
    const entropy = p.getByTestId("chart-actor/entropy");
    await entropy.locator("canvas").waitFor();
    const yTicks = (await entropy.getAttribute("data-y-ticks"))!.split("|");
    expect(yTicks.length).toBeGreaterThan(1);
    expect(new Set(yTicks).size).toBe(yTicks.length);
    for (const t of yTicks) expect(Number(t)).toBeCloseTo(4.6762, 2);
    await screenshot(p, "10-training");
  });

  it("shows tokens as decoded pieces where the spans record text, with the id on hover; ids otherwise", async () => {
    // The seeded calls carry ids only (the mock engine's pieces are "token_id:N"): the page says so.
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/rollouts/${await rolloutIdOf("chat", SEED_TASKS[0]!.a)}`);
    await p.getByTestId("tab-triplets").click();
    await expect(p.getByTestId("token-text-note").textContent()).resolves.toMatch(/Tokens show as ids/);
    // A call whose span records per-token text (logprobs.content), as client spans and the proxy with
    // captured bodies do.
    const r = await store.startRollout({ input: { note: "pieces" } });
    const pieces = ["Hello", " world", "!\n"];
    await store.addSpan({
      rollout_id: r.rollout_id,
      attempt_id: r.attempt.attempt_id,
      sequence_id: 1,
      trace_id: "a".repeat(32),
      span_id: "b".repeat(16),
      parent_id: null,
      name: "openai.chat.completion",
      status: { status_code: "OK", description: null },
      attributes: {
        "gen_ai.request.model": "m",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "Say hello",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": pieces.join(""),
        prompt_token_ids: [101, 102],
        response_token_ids: [201, 202, 203],
        "logprobs.content": JSON.stringify(pieces.map((token) => ({ token, logprob: -0.5, bytes: null }))),
      },
      events: [],
      links: [],
      start_time: 1,
      end_time: 2,
      context: null,
      parent: null,
      resource: { attributes: {}, schema_url: "" },
    });
    await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
    const q = await page();
    await q.goto(`${server.url}/dashboard/#/rollouts/${r.rollout_id}`);
    await q.getByTestId("tab-triplets").click();
    const cells = q.getByTestId("triplet-tokens").first().locator(".tok");
    await expect(cells.allTextContents()).resolves.toEqual(["101", "102", "Hello", "·world", "!↵"]);
    await expect(cells.nth(3).getAttribute("title")).resolves.toMatch(
      /^#3 id 202 " world" · response · mask 1 · logprob -0\.500$/,
    );
    await expect(q.getByTestId("token-text-note").textContent()).resolves.toMatch(/3 distinct ids/);
    await screenshot(q, "10c-token-pieces");
  });

  it("shows why an attempt failed: the agent's exception, and a runner stopped before any span", async () => {
    const p = await page();
    await p.goto(`${server.url}/dashboard/#/rollouts/${await rolloutIdOf("crash", 1)}`);
    await p.getByTestId("attempt-error").waitFor();
    await expect(p.getByTestId("attempt-error-type").textContent()).resolves.toBe("Error");
    await expect(p.getByTestId("attempt-error-message").textContent()).resolves.toBe("agent crashed on 1+1");
    await expect(p.getByTestId("attempt-error-cell").textContent()).resolves.toBe(
      "Error: agent crashed on 1+1",
    );
    await screenshot(p, "10b-attempt-error");
    // What a runner records when it is stopped before the agent returned: no spans, only metadata.error.
    const stopped = await store.startRollout({ input: { note: "stopped" } });
    await store.updateAttempt(stopped.rollout_id, stopped.attempt.attempt_id, {
      status: "failed",
      metadata: {
        error: { type: "RunnerStopped", message: "runner Worker-9 stopped before the rollout finished" },
      },
    });
    const q = await page();
    await q.goto(`${server.url}/dashboard/#/rollouts/${stopped.rollout_id}`);
    await q.getByTestId("state-no-spans").waitFor();
    await expect(q.getByTestId("attempt-error-type").textContent()).resolves.toBe("RunnerStopped");
    await expect(q.getByTestId("attempt-error-message").textContent()).resolves.toBe(
      "runner Worker-9 stopped before the rollout finished",
    );
  });
});

describe("agl-dashboard standalone", () => {
  it("agl-dashboard standalone: forwards to the store with the token, and says when the store is unreachable", async () => {
    const standalone = await startDashboardServer({ storeUrl: server.url, port: 0, assetsDir });
    const dead = await startDashboardServer({
      storeUrl: "http://127.0.0.1:9",
      port: 0,
      assetsDir,
      timeoutMs: 5000,
    });
    try {
      const p = await page();
      await p.goto(standalone.url);
      await p.getByTestId("rollouts-table").waitFor();
      expect(await p.getByTestId("rollout-row").count()).toBe(50);
      const q = await page();
      await q.goto(dead.url);
      await q.getByTestId("state-unreachable").waitFor();
      await screenshot(q, "12-unreachable");
    } finally {
      await standalone.close();
      await dead.close();
    }
  });
});
