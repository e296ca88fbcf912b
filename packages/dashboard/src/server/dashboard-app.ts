import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Context, Hono } from "hono";

export interface DashboardAppOptions {
  /** The built page (index.html, app.js, app.css). Default: the assets shipped in this package. */
  assetsDir?: string;
  /** A trainer's metrics log (JSON lines with a numeric `step`) for the Training page. */
  metricsFile?: string | null;
  /**
   * Whether a request may read the metrics file, given its Authorization header. The page itself is
   * public (it holds no data); everything the page shows comes from the store, behind its token.
   */
  authorize?: (authorization: string | undefined) => boolean | Promise<boolean>;
}

const CONTENT_TYPES: Record<string, string> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
};

/** Where the package's built page lives (dist/assets next to the bundled module). */
export function defaultAssetsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // dist/index.js → dist/assets; src/server/dashboard-app.ts (tests, tsx) → dist/assets
  for (const candidate of [join(here, "assets"), join(here, "..", "..", "dist", "assets")]) {
    if (existsSync(join(candidate, "index.html"))) return candidate;
  }
  throw new Error(
    `the dashboard's built assets are missing (looked next to ${here}); run \`pnpm --filter @agl/dashboard build\``,
  );
}

/**
 * The dashboard as a hono sub-app, to mount under a path (agl-store mounts it at /dashboard): the
 * page's three files, read once into memory, and the metrics log behind `authorize`. The page calls
 * the store API at /v1/agl on its own origin.
 */
export function createDashboardApp(options: DashboardAppOptions = {}): Hono {
  const dir = options.assetsDir ?? defaultAssetsDir();
  const files = new Map<string, Buffer>();
  for (const name of Object.keys(CONTENT_TYPES)) files.set(name, readFileSync(join(dir, name)));
  const authorize = options.authorize ?? (() => true);
  const app = new Hono();

  const serve = (c: Context, name: string) =>
    c.body(new Uint8Array(files.get(name)!), 200, {
      "content-type": CONTENT_TYPES[name]!,
      // The bundle's names do not change between versions: revalidate so an upgrade is picked up.
      "cache-control": "no-cache",
      "x-content-type-options": "nosniff",
      // Span contents are untrusted text: the page renders them as text, and may load nothing but itself.
      // No <base> may redirect its relative URLs, and its forms (handled in script) submit nowhere.
      "content-security-policy":
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    });

  app.get("/metrics.jsonl", async (c) => {
    if (!options.metricsFile) {
      return c.json({ detail: "No metrics file configured (--metrics)", error_type: "NotFound" }, 404);
    }
    if (!(await authorize(c.req.header("authorization")))) {
      return c.json({ detail: "Invalid or missing bearer token", error_type: "Unauthorized" }, 401);
    }
    let text: string;
    try {
      text = await readFile(options.metricsFile, "utf8");
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") {
        return c.json({ detail: "The metrics file does not exist (yet)", error_type: "NotFound" }, 404);
      }
      throw error;
    }
    return c.body(text, 200, {
      "content-type": "application/x-ndjson; charset=utf-8",
      "cache-control": "no-store",
    });
  });
  // The page's own files; "" is the mount point with its trailing slash (/dashboard/).
  app.get("*", (c) => {
    const name = c.req.path.slice(c.req.path.lastIndexOf("/") + 1) || "index.html";
    if (!files.has(name)) return c.json({ detail: `No dashboard file ${name}`, error_type: "NotFound" }, 404);
    return serve(c, name);
  });
  return app;
}
