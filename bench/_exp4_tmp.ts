import { Agent, request } from "node:http";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { LLMProxy } from "@agl/proxy";

const up = await startMockLLMServer({
  delayMs: Number(process.argv[2] ?? 20),
  respond: () => ({ content: "17 * 23 = 391." }),
});
const store = { addSpan: async () => null, getNextSpanSequenceId: async () => 1 } as any;
const proxy = new LLMProxy({
  store,
  backends: [{ url: up.baseURL }],
  model: "policy",
  healthCheckIntervalMs: 0,
  logger: { warn() {}, error() {} },
});
const url = await proxy.start();
const w = (proxy as any).handler.writer;
if (process.argv[4]?.includes("seq")) w.nextSequenceId = async () => 1;
if (process.argv[4]?.includes("write")) w.write = async () => {};
if (process.argv[4]?.includes("build")) (proxy as any).handler.writeSpan = async () => {};
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
const post = (u: string, body: string) =>
  new Promise<number>((res) => {
    const x = new URL(u);
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
  for (let i = 0; i < 50; i++)
    p.push(
      await post(
        url +
          (process.argv[3] === "unattr"
            ? "/v1/chat/completions"
            : "/rollout/r/attempt/a/v1/chat/completions"),
        body,
      ),
    );
}
d.sort((a, b) => a - b);
p.sort((a, b) => a - b);
console.log("direct p50", d[100], "proxy p50", p[100], "added", p[100]! - d[100]!);
process.exit(0);
