/**
 * A server in its own process for bench/store.ts (so client and server each get a core):
 *   tsx bench/support/http-server.ts store <uri>   the store server (@agl/store) on the store at <uri>
 *   tsx bench/support/http-server.ts trivial       a trivial hono endpoint (the HTTP ceiling)
 * AGL_STORE_ENTRY=<checkout>/packages/store/dist/index.js serves another build of @agl/store.
 * Prints the base URL on stdout, runs until stdin closes; each "cpu" line on stdin is answered with
 * `{"cpu_ms": n, "requests": n}` (CPU time used and store requests served so far).
 */
import { createRequire } from "node:module";

// AGL_STORE_ENTRY: another build's dist/index.js (an older checkout), to measure it back to back.
const { openStore, silentServerLogger, startStoreServer } = (await import(
  process.env.AGL_STORE_ENTRY ?? "@agl/store"
)) as typeof import("@agl/store");

// The ceiling must use the very server library of @agl/store, so load it from that package.
const storeRequire = createRequire(new URL("../../packages/store/package.json", import.meta.url));
interface MiniContext {
  json(body: unknown): Response;
}
interface MiniServer {
  address(): unknown;
  close(callback: () => void): void;
}
const { serve } = storeRequire("@hono/node-server") as {
  serve(options: { fetch: unknown; hostname: string; port: number }, listening: () => void): MiniServer;
};
const { Hono } = storeRequire("hono") as {
  Hono: new () => { get(path: string, handler: (c: MiniContext) => Response): void; fetch: unknown };
};

const [mode, uri] = process.argv.slice(2);
let close: () => Promise<void>;
let requests = 0;
if (mode === "store") {
  const store = await openStore(uri!, { postgres: { poolSize: 16 } });
  // Counts requests (the server logs one "request" line each, at debug or, refused, at info)
  // instead of writing them.
  const count = (message: string) => {
    if (message === "request") requests++;
  };
  const logger = { ...silentServerLogger, debug: count, info: count };
  const server = await startStoreServer({ store, port: 0, logger, closeStore: true });
  close = server.close;
  console.log(server.url);
} else if (mode === "trivial") {
  const app = new Hono();
  app.get("/health", (c) => c.json({ status: "ok" }));
  const server = await new Promise<MiniServer>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
  });
  const address = server.address() as { port: number };
  close = () => new Promise((resolve) => server.close(() => resolve()));
  console.log(`http://127.0.0.1:${address.port}`);
} else {
  console.error("usage: http-server.ts store <uri> | trivial");
  process.exit(2);
}
// Each "cpu" line on stdin is answered with this process's CPU time so far (ms), for the cost breakdown.
let input = "";
process.stdin.on("data", (chunk: Buffer) => {
  input += chunk.toString();
  let nl = input.indexOf("\n");
  while (nl >= 0) {
    const line = input.slice(0, nl).trim();
    input = input.slice(nl + 1);
    if (line === "cpu") {
      const { user, system } = process.cpuUsage();
      console.log(JSON.stringify({ cpu_ms: (user + system) / 1000, requests }));
    }
    nl = input.indexOf("\n");
  }
});
process.stdin.once("end", () => {
  close().then(() => process.exit(0));
});
