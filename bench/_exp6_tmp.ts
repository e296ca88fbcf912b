import { Agent, createServer, request } from "node:http";
import { createRequire } from "node:module";
import { startMockLLMServer } from "@agl/core/mock-llm";

const { Pool } = createRequire("/work/main/packages/proxy/package.json")("undici");
const up = await startMockLLMServer({
  delayMs: Number(process.argv[2] ?? 20),
  respond: () => ({ content: "17 * 23 = 391." }),
});
const u = new URL(up.url);
const ag2 = new Agent({ keepAlive: true, maxSockets: 64 });
const pool = new Pool(up.url, { connections: 64, pipelining: 1, keepAliveTimeout: 4000 });
const bare = createServer((req, res) => {
  const c: Buffer[] = [];
  req.on("data", (x) => c.push(x));
  req.on("end", () => {
    const body = Buffer.concat(c);
    const chunks: Buffer[] = [];
    let st = 0;
    pool.dispatch(
      {
        origin: up.url,
        path: "/v1/chat/completions",
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        headersTimeout: 300000,
        bodyTimeout: 300000,
      },
      {
        onRequestStart() {},
        onResponseStart(_c: any, s: number) {
          st = s;
        },
        onResponseData(_c: any, x: Buffer) {
          chunks.push(x);
        },
        onResponseEnd() {
          const b = Buffer.concat(chunks);
          res.writeHead(st, { "content-type": "application/json", "content-length": b.length });
          res.end(b);
        },
        onResponseError(_c: any, e: Error) {
          res.destroy(e);
        },
      },
    );
    return;
    const r = request(
      {
        hostname: u.hostname,
        port: u.port,
        path: "/v1/chat/completions",
        method: "POST",
        agent: ag2,
        headers: { "content-type": "application/json", "content-length": body.length },
      },
      (ur) => {
        const o: Buffer[] = [];
        ur.on("data", (x) => o.push(x));
        ur.on("end", () => {
          const b = Buffer.concat(o);
          res.writeHead(200, { "content-type": "application/json", "content-length": b.length });
          res.end(b);
        });
      },
    );
    r.end(body);
  });
});
await new Promise<void>((r) => bare.listen(0, "127.0.0.1", r));
const url = `http://127.0.0.1:${(bare.address() as any).port}`;
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
const post = (uu: string, body: string) =>
  new Promise<number>((res) => {
    const x = new URL(uu);
    const t0 = process.hrtime.bigint();
    const r = request(
      {
        hostname: x.hostname,
        port: x.port,
        path: x.pathname,
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (rs) => {
        rs.resume();
        rs.on("end", () => res(Number(process.hrtime.bigint() - t0) / 1e6));
      },
    );
    r.end(body);
  });
const body = JSON.stringify({
  model: "x",
  messages: [{ role: "user", content: "q" }],
  return_token_ids: true,
  logprobs: true,
});
const d: number[] = [],
  p: number[] = [];
for (let b = 0; b < 4; b++) {
  for (let i = 0; i < 50; i++) d.push(await post(up.url + "/v1/chat/completions", body));
  for (let i = 0; i < 50; i++) p.push(await post(url + "/v1/chat/completions", body));
}
d.sort((a, b) => a - b);
p.sort((a, b) => a - b);
console.log("undici: direct p50", d[100], "proxy p50", p[100], "added", p[100]! - d[100]!);
process.exit(0);
