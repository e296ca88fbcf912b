/**
 * Load helpers shared by the proxy benchmarks: one sequential keep-alive caller timed with hrtime, and
 * autocannon at fixed concurrency.
 */
import { Agent, request } from "node:http";
import { createRequire } from "node:module";

const agent = new Agent({ keepAlive: true, maxSockets: 1 });
export function post(url: string, body: string): Promise<number> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = request(
      {
        hostname: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on("end", () =>
          res.statusCode === 200
            ? resolve(Number(process.hrtime.bigint() - t0) / 1e6)
            : reject(new Error(`HTTP ${res.statusCode}`)),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

export const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

export async function cannon(urls: string[], body: string, connections: number, seconds: number) {
  const autocannon = createRequire(import.meta.url)("autocannon") as (opts: any) => Promise<any>;
  const u = new URL(urls[0]!);
  const result = await autocannon({
    url: `${u.protocol}//${u.host}`,
    connections,
    duration: seconds,
    requests: urls.map((x) => ({
      method: "POST",
      path: new URL(x).pathname,
      headers: { "content-type": "application/json" },
      body,
    })),
  });
  return {
    reqPerSec: result.requests.average as number,
    p50: result.latency.p50 as number,
    p99: result.latency.p99 as number,
    errors: (result.errors as number) + (result.non2xx as number),
    total: result.requests.total as number,
  };
}
