import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { createDashboardApp } from "./dashboard-app.js";
import { forwardToStore } from "./forward.js";

export interface DashboardServerOptions {
  /** Any Agent Lightning v0.3 store server (agl-store, or Python's), e.g. http://127.0.0.1:4747. */
  storeUrl: string;
  host?: string;
  /** 0 picks a free port. Default 4748. */
  port?: number;
  metricsFile?: string | null;
  assetsDir?: string;
  /** Deadline for each forwarded store call, ms. Default 30 s. */
  timeoutMs?: number;
}

export interface DashboardServer {
  /** The page's address, e.g. http://127.0.0.1:4748/dashboard/ */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** The standalone dashboard: the page at /dashboard/ and read-only /v1/agl forwarded to the store. */
export function createStandaloneApp(options: DashboardServerOptions): Hono {
  const storeUrl = options.storeUrl.replace(/\/+$/, "").replace(/\/v1\/agl$/, "");
  const timeoutMs = options.timeoutMs ?? 30_000;
  const app = new Hono();
  // The metrics file is as private as the store: readable with a token the store accepts.
  const authorize = async (authorization: string | undefined) => {
    try {
      const r = await fetch(`${storeUrl}/v1/agl/statistics`, {
        headers: authorization ? { authorization } : {},
        signal: AbortSignal.timeout(timeoutMs),
      });
      await r.body?.cancel();
      return r.ok;
    } catch {
      return false;
    }
  };
  app.get("/dashboard", (c) => c.redirect("/dashboard/"));
  app.route(
    "/dashboard",
    createDashboardApp({ assetsDir: options.assetsDir, metricsFile: options.metricsFile, authorize }),
  );
  app.get("/", (c) => c.redirect("/dashboard/"));
  app.all("/v1/agl/*", (c) => forwardToStore(c, { storeUrl, timeoutMs, bodyLimitBytes: 1024 * 1024 }));
  app.notFound((c) =>
    c.json({ detail: `No route for ${c.req.method} ${c.req.path}`, error_type: "NotFound" }, 404),
  );
  return app;
}

export async function startDashboardServer(options: DashboardServerOptions): Promise<DashboardServer> {
  const app = createStandaloneApp(options);
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve(
      { fetch: app.fetch, hostname: options.host ?? "127.0.0.1", port: options.port ?? 4748 },
      () => resolve(s as Server),
    ) as Server;
    s.once("error", reject);
  });
  server.requestTimeout = (options.timeoutMs ?? 30_000) + 5_000;
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}/dashboard/`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        // An open browser tab keeps polling over keep-alive connections: idle ones close now, and a connection
        // busy at this moment would otherwise hold close() forever once it turns idle. Reads lose nothing by
        // being cut, so whatever is still open after a short grace is closed too.
        const grace = setTimeout(() => server.closeAllConnections(), 1_000);
        server.close(() => {
          clearTimeout(grace);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
