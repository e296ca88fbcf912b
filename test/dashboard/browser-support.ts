/** Headless Chromium (Debian's `chromium`, driven by playwright-core) for the dashboard's browser tests. */
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { type Browser, chromium, type Page } from "playwright-core";
import { expect } from "vitest";

export const CHROMIUM = process.env.AGL_CHROMIUM ?? "/usr/bin/chromium";
/** Screenshots for humans; the folder is git-ignored. */
export const SCREENSHOT_DIR = fileURLToPath(new URL("../../.screenshots/dashboard/", import.meta.url));

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `no Chromium at ${CHROMIUM}: install Debian's package (apt-get install -y chromium; .ci/run does) or set AGL_CHROMIUM`,
    );
  }
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      "--disable-dev-shm-usage",
    ],
  });
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${SCREENSHOT_DIR}${name}.png`, fullPage: true });
}

/** Uncaught errors and console errors of each page, checked by the tests. */
export const pageErrors = new WeakMap<Page, string[]>();

/** Content-Security-Policy violations each page reported (events and console messages), checked by the tests. */
export const cspViolations = new WeakMap<Page, string[]>();

/** A new page; with a token, its sessionStorage already holds it (skips the login prompt). */
export async function openPage(browser: Browser, token: string | null): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  if (token) {
    await context.addInitScript((t) => sessionStorage.setItem("agl-dashboard-token", t), token);
  }
  // Fail with the locator's name well before the test's own timeout.
  context.setDefaultTimeout(15_000);
  const page = await context.newPage();
  const errors: string[] = [];
  pageErrors.set(page, errors);
  page.on("pageerror", (error) => errors.push(String(error)));
  const violations: string[] = [];
  cspViolations.set(page, violations);
  page.on("console", (message) => {
    if (message.text().includes("Content Security Policy")) violations.push(message.text());
  });
  await page.exposeFunction("__aglCspViolation", (what: string) => violations.push(what));
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) =>
      (window as unknown as { __aglCspViolation(w: string): void }).__aglCspViolation(
        `${e.violatedDirective} ${e.blockedURI}`,
      ),
    );
  });
  return page;
}

/** Pages a test file opens, so that its `afterAll` can check every one for page errors and CSP violations. */
export class TrackedPages {
  private readonly pages: Page[] = [];

  async open(browser: Browser, token: string | null): Promise<Page> {
    const page = await openPage(browser, token);
    this.pages.push(page);
    return page;
  }

  expectClean(): void {
    for (const p of this.pages) {
      expect(pageErrors.get(p), "uncaught errors in the page").toEqual([]);
      expect(cspViolations.get(p), "Content-Security-Policy violations").toEqual([]);
    }
  }
}
