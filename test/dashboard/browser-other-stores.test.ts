/**
 * The dashboard in headless Chromium against stores other than the seeded agl-store of browser.test.ts:
 * an empty store without metrics or workers, and a Python Agent Lightning server (which filters by mode and
 * data id only on the page it returns).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore } from "@agl/core";
import { createDashboardApp, startDashboardServer } from "@agl/dashboard";
import { startStoreServer } from "@agl/store";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPythonStoreServer } from "../../packages/client/src/test-support/python-agl/index.js";
import { buildDashboardAssets } from "../../packages/dashboard/src/build/build-assets.js";
import { launchChromium, screenshot, TrackedPages } from "./browser-support.js";

const quiet = { info() {}, warn() {}, error() {} };

let dir: string;
let assetsDir: string;
let browser: Browser;
const pages = new TrackedPages();
const page = (token: string | null): Promise<Page> => pages.open(browser, token);

const rowIds = (p: Page) =>
  p.getByTestId("rollout-row").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-rollout-id")));

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agl-dashboard-other-"));
  assetsDir = join(dir, "assets");
  await buildDashboardAssets({ outDir: assetsDir });
  browser = await launchChromium();
});

afterAll(async () => {
  pages.expectClean();
  await browser?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("other stores", () => {
  it("an empty store says it is empty; a store without a metrics file says so", async () => {
    const empty = new InMemoryLightningStore({ watchdog: false });
    const emptyServer = await startStoreServer({
      store: empty,
      port: 0,
      logger: quiet,
      dashboard: createDashboardApp({ assetsDir }),
    });
    try {
      const p = await page(null);
      await p.goto(`${emptyServer.url}/dashboard/`);
      await p.getByTestId("state-empty").waitFor();
      await screenshot(p, "11-empty-store");
      await p.goto(`${emptyServer.url}/dashboard/#/training`);
      await p.getByTestId("state-no-metrics").waitFor();
      await p.goto(`${emptyServer.url}/dashboard/#/workers`);
      await p.getByTestId("state-no-workers").waitFor();
    } finally {
      await emptyServer.close();
      await empty.close();
    }
  });

  it("against a Python Agent Lightning server, mode and data id narrow the current page and say so", async () => {
    const python = await startPythonStoreServer();
    await python.store.enqueueManyRollouts(
      Array.from({ length: 70 }, (_, i) => ({
        input: { i },
        mode: i % 3 === 0 ? ("train" as const) : ("val" as const),
        metadata: { data_id: `d-${i}` },
      })),
    );
    const standalone = await startDashboardServer({ storeUrl: python.url, port: 0, assetsDir });
    try {
      const p = await page(null);
      await p.goto(standalone.url);
      await p.getByTestId("rollouts-table").waitFor();
      await p.getByText("page 1 of 2 · 70 total").waitFor();
      const modeCells = () => p.locator("[data-testid=rollout-row] td:nth-child(3)").allTextContents();
      const pageIds = await rowIds(p);
      const before = await modeCells();
      const trainIds = pageIds.filter((_, i) => before[i] === "train");
      expect(trainIds.length).toBeGreaterThan(0);
      expect(trainIds.length).toBeLessThan(50);
      await expect(p.getByTestId("mode-filter").locator("option").first().textContent()).resolves.toBe(
        "any mode (this page)",
      );
      await p.getByTestId("mode-filter").selectOption("train");
      await p.waitForFunction(() => location.hash.includes("mode=train"));
      await expect.poll(() => rowIds(p)).toEqual(trainIds);
      // the store's paging and total are unchanged; the note says rows were hidden on this page only
      await expect(p.getByTestId("page-info").textContent()).resolves.toBe("page 1 of 2 · 70 total");
      await expect(p.getByTestId("page-filter-note").textContent()).resolves.toContain(
        `${50 - trainIds.length} of 50 rows on this page hidden`,
      );
      await screenshot(p, "13-python-store-page-filter");
    } finally {
      await standalone.close();
      await python.close();
    }
  });
});
