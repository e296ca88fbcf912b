import { timingSafeEqual } from "node:crypto";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Hono } from "hono";

/** What agl-store uses of @agl/dashboard (an optional peer: the store never depends on it). */
interface DashboardModule {
  createDashboardApp(options: {
    metricsFile?: string | null;
    authorize?: (authorization: string | undefined) => boolean;
  }): Hono;
}

const DASHBOARD_PACKAGE = "@agl/dashboard";

async function importDashboard(): Promise<DashboardModule | null> {
  // Next to this package first (npm i @agl/store @agl/dashboard), then from the working directory's project.
  const attempts: Array<() => Promise<unknown>> = [
    () => import(/* @vite-ignore */ DASHBOARD_PACKAGE),
    () =>
      import(
        pathToFileURL(createRequire(join(process.cwd(), "package.json")).resolve(DASHBOARD_PACKAGE)).href
      ),
  ];
  for (const attempt of attempts) {
    try {
      const mod = (await attempt()) as Partial<DashboardModule>;
      if (typeof mod.createDashboardApp === "function") return mod as DashboardModule;
    } catch {
      // not installed there
    }
  }
  return null;
}

/** Does this header carry exactly the store's token (constant-time)? An open store accepts anything. */
export function bearerMatches(token: string | null, authorization: string | undefined): boolean {
  if (!token) return true;
  const match = /^Bearer\s+(.+)$/i.exec(authorization ?? "");
  if (!match) return false;
  const given = Buffer.from(match[1]!.trim());
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * The dashboard sub-app when @agl/dashboard is installed, else null. Its metrics file is readable
 * with the store's own bearer token.
 */
export async function loadDashboard(options: {
  token: string | null;
  metricsFile?: string | null;
}): Promise<Hono | null> {
  const mod = await importDashboard();
  if (!mod) return null;
  return mod.createDashboardApp({
    metricsFile: options.metricsFile ?? null,
    authorize: (authorization) => bearerMatches(options.token, authorization),
  });
}
