/**
 * Dashboard speed on a big store: time to first render of the rollouts page (first page, a deep page,
 * a status filter) and of a rollout's detail page (span tree; triplets computed in the browser), in
 * headless Chromium against agl-store on SQLite with 100,000 rollouts and 1,000,000 spans. Each run
 * opens a fresh browser context (cold cache). Control: the same REST query timed from node, which
 * is the floor any page built on that API pays. Also the size of the built bundle.
 *
 *   pnpm exec tsx bench/dashboard.ts    (env: BENCH_DASHBOARD_ROLLOUTS=100000, BENCH_DASHBOARD_SPANS=10
 *                                        per rollout, BENCH_DASHBOARD_RUNS=7, BENCH_DASHBOARD_DB=<reuse file>)
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createDashboardApp } from "@agl/dashboard";
import { SqliteLightningStore, startStoreServer } from "@agl/store";
import type { Browser } from "playwright-core";
import { buildDashboardAssets } from "../packages/dashboard/src/build/build-assets.js";
import { launchChromium } from "../test/dashboard/browser-support.js";
import { fillStore } from "./support/dashboard-data.js";

const ROLLOUTS = Number(process.env.BENCH_DASHBOARD_ROLLOUTS ?? 100_000);
const SPANS = Number(process.env.BENCH_DASHBOARD_SPANS ?? 10);
const RUNS = Number(process.env.BENCH_DASHBOARD_RUNS ?? 7);
const TOKEN = "bench-token";
const RESULTS = fileURLToPath(new URL("./results/", import.meta.url));

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p90 = (xs: number[]) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * 0.9) - 1)]!;
const round = (x: number) => Math.round(x * 10) / 10;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "agl-bench-dashboard-"));
  const dbFile = process.env.BENCH_DASHBOARD_DB ?? join(dir, "agl.db");
  const reuse = existsSync(dbFile);
  const build = await buildDashboardAssets({ outDir: join(dir, "assets") });
  const store = new SqliteLightningStore(dbFile);
  let sample: string;
  let fillSeconds: number | null = null;
  if (reuse) {
    sample = (await store.queryRollouts({ limit: 2, offset: 0 })).items[1]!.rollout_id;
  } else {
    const started = performance.now();
    sample = await fillStore(store, ROLLOUTS, SPANS, (done) => {
      if (done % 10_000 === 0) process.stdout.write(`  filled ${done} rollouts\n`);
    });
    fillSeconds = (performance.now() - started) / 1000;
  }
  const stats = await store.statistics();
  console.log(
    `store: ${stats.total_rollouts} rollouts, ${stats.total_spans} spans${fillSeconds ? ` (filled in ${fillSeconds.toFixed(0)} s)` : " (reused)"}`,
  );

  const server = await startStoreServer({
    store,
    port: 0,
    token: TOKEN,
    logger: { info() {}, warn() {}, error() {} },
    dashboard: createDashboardApp({ assetsDir: join(dir, "assets") }),
  });
  const browser: Browser = await launchChromium();
  const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };

  /** ms from navigation to `ready` in a fresh context; the page's own timings via performance.now(). */
  async function timePage(
    hash: string,
    ready: string,
    extra?: string,
  ): Promise<{ first: number; full: number | null }> {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.addInitScript((t) => sessionStorage.setItem("agl-dashboard-token", t), TOKEN);
    context.setDefaultTimeout(60_000);
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard/${hash}`, { waitUntil: "commit" });
    await page.waitForSelector(ready);
    const first = await page.evaluate(() => performance.now());
    let full: number | null = null;
    if (extra) {
      await page.waitForFunction(extra);
      full = await page.evaluate(() => performance.now());
    }
    await context.close();
    return { first, full };
  }

  async function timeApi(path: string, body: unknown): Promise<number> {
    const started = performance.now();
    const r = await fetch(`${server.url}/v1/agl${path}`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify(body),
    });
    await r.json();
    return performance.now() - started;
  }

  // the middle of the table, on a page boundary (offset 49,950 with 100,000 rollouts)
  const deep = Math.floor(stats.total_rollouts / 2 / 50) * 50 - 50;
  const rewardsDone =
    "document.querySelectorAll('[data-testid=reward]').length > 0 && ![...document.querySelectorAll('[data-testid=reward]')].some(e => e.textContent === '…')";
  const cases = [
    {
      name: "rollouts, page 1 (newest first)",
      hash: "#/rollouts",
      ready: "[data-testid=rollout-row]",
      extra: rewardsDone,
      api: ["/rollouts/search", { sort_by: "start_time", sort_order: "desc", limit: 50, offset: 0 }],
    },
    {
      name: `rollouts, page ${deep / 50 + 1} (offset ${deep.toLocaleString("en")})`,
      hash: `#/rollouts?offset=${deep}`,
      ready: "[data-testid=rollout-row]",
      extra: rewardsDone,
      api: ["/rollouts/search", { sort_by: "start_time", sort_order: "desc", limit: 50, offset: deep }],
    },
    {
      name: "rollouts, status = failed",
      hash: "#/rollouts?status=failed",
      ready: "[data-testid=rollout-row]",
      extra: rewardsDone,
      api: [
        "/rollouts/search",
        { status_in: ["failed"], sort_by: "start_time", sort_order: "desc", limit: 50, offset: 0 },
      ],
    },
    {
      name: `rollout detail (${SPANS} spans; span tree, then triplets)`,
      hash: `#/rollouts/${sample}`,
      ready: "[data-testid=span-row]",
      extra: "document.querySelector('[data-testid=tab-triplets]') !== null",
      api: ["/spans/search", { rollout_id: sample, limit: 1000, offset: 0 }],
    },
  ] as const;

  // one warm-up of each (server caches, JIT), not counted
  for (const c of cases) await timePage(c.hash, c.ready, c.extra);
  const rows: Array<Record<string, unknown>> = [];
  for (const c of cases) {
    const first: number[] = [];
    const full: number[] = [];
    const api: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t = await timePage(c.hash, c.ready, c.extra);
      first.push(t.first);
      if (t.full !== null) full.push(t.full);
      api.push(await timeApi(c.api[0], c.api[1]));
    }
    const row = {
      page: c.name,
      first_render_ms_median: round(median(first)),
      first_render_ms_p90: round(p90(first)),
      complete_ms_median: full.length ? round(median(full)) : null,
      api_call_ms_median: round(median(api)),
    };
    rows.push(row);
    console.log(row);
  }
  await browser.close();
  await server.close();
  await store.close();
  if (!process.env.BENCH_DASHBOARD_DB) rmSync(dir, { recursive: true, force: true });

  const bundle = Object.fromEntries(
    build.files.map((f) => [f.name, { bytes: f.bytes, gzip_bytes: f.gzipBytes }]),
  );
  const machine = `${availableParallelism()} cores (${cpus()[0]?.model.trim()}), Node ${process.version}`;
  const load = loadavg()
    .map((x) => x.toFixed(1))
    .join(" / ");
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(
    join(RESULTS, "dashboard.json"),
    `${JSON.stringify({ rollouts: stats.total_rollouts, spans: stats.total_spans, runs: RUNS, fill_seconds: fillSeconds, machine, load, rows, bundle }, null, 2)}\n`,
  );
  const md = [
    "# Dashboard benchmark",
    "",
    `agl-store on SQLite with **${stats.total_rollouts.toLocaleString("en")} rollouts and ${stats.total_spans.toLocaleString("en")} spans**` +
      ` (${SPANS} per rollout: an agent span, LLM calls with messages and token ids, tool spans, a reward), the dashboard mounted` +
      " at /dashboard, bearer token on. Headless Chromium (Debian), a fresh browser context per run (cold cache), " +
      `${RUNS} runs per page after one warm-up. Machine: ${machine}; load average at the end: ${load} (the machine is shared).`,
    "",
    "*First render* = navigation start → the first table row (rollouts) or span row (detail) is in the DOM, from the page's" +
      " `performance.now()`. *Complete* = the rewards of all 50 visible rows are shown (one small span query per row) / the" +
      " triplets are computed. *API call* = the one REST query the first render waits for, timed from node: the floor.",
    "",
    "| page | first render, median ms | p90 ms | complete, median ms | API call alone, median ms |",
    "|---|---:|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.page} | ${r.first_render_ms_median} | ${r.first_render_ms_p90} | ${r.complete_ms_median ?? "–"} | ${r.api_call_ms_median} |`,
    ),
    "",
    "Bundle (esbuild, minified; Preact + uPlot + jsdiff + @agl/adapter and the zod schemas it validates options with):",
    "",
    "| file | bytes | gzip bytes |",
    "|---|---:|---:|",
    ...build.files.map(
      (f) => `| ${f.name} | ${f.bytes.toLocaleString("en")} | ${f.gzipBytes.toLocaleString("en")} |`,
    ),
    "",
  ].join("\n");
  writeFileSync(join(RESULTS, "dashboard.md"), md);
  console.log(md);
}

await main();
