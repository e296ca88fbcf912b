import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { InMemoryLightningStore, type Span } from "@agl/core";
import { type MockLLMServer, type MockLLMServerOptions, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import type { LLMProxyOptions } from "../options.js";
import { LLMProxy } from "../proxy.js";

/** The one tool the capture tests offer the model. */
export const calculatorTools = [
  {
    type: "function" as const,
    function: {
      name: "calculator",
      description: "eval",
      parameters: { type: "object", properties: { expr: { type: "string" } } },
    },
  },
];

export interface TapExchange {
  path: string;
  requestBody: string;
  status: number;
  responseBody: string;
  /** The exact bytes the upstream sent. */
  responseBytes: Buffer;
}

/** A transparent HTTP relay that records the exact bytes an upstream sent (the tests' ground truth). */
export async function startTap(
  target: string,
): Promise<{ url: string; exchanges: TapExchange[]; close(): Promise<void> }> {
  const t = new URL(target);
  const exchanges: TapExchange[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const requestBody = Buffer.concat(chunks).toString("utf8");
      const up = httpRequest(
        { hostname: t.hostname, port: t.port, path: req.url, method: req.method, headers: req.headers },
        (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.headers);
          const out: Buffer[] = [];
          const ex: TapExchange = {
            path: req.url ?? "",
            requestBody,
            status: upRes.statusCode ?? 0,
            responseBody: "",
            responseBytes: Buffer.alloc(0),
          };
          exchanges.push(ex);
          upRes.on("data", (c: Buffer) => {
            out.push(c);
            ex.responseBytes = Buffer.concat(out);
            ex.responseBody = ex.responseBytes.toString("utf8");
            res.write(c);
          });
          upRes.on("end", () => res.end());
          upRes.on("aborted", () => res.destroy());
          upRes.on("error", () => res.destroy());
        },
      );
      up.on("error", () => res.destroy());
      up.end(requestBody);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exchanges,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export interface Harness {
  store: InMemoryLightningStore;
  proxy: LLMProxy;
  mocks: MockLLMServer[];
  taps: Awaited<ReturnType<typeof startTap>>[];
  url: string;
  warnings: string[];
  /** A rollout and attempt that exist in the store. */
  newAttempt(): Promise<{ rolloutId: string; attemptId: string }>;
  client(
    baseURL: string,
    options?: { apiKey?: string; headers?: Record<string, string>; maxRetries?: number },
  ): OpenAI;
  spans(rolloutId: string): Promise<Span[]>;
  close(): Promise<void>;
}

export async function startHarness(
  options: {
    mocks?: MockLLMServerOptions[];
    proxy?: Partial<LLMProxyOptions>;
    tap?: boolean;
    /** The model name each backend is configured with (index-aligned with `mocks`). */
    backendModels?: Array<string | undefined>;
  } = {},
): Promise<Harness> {
  const store = new InMemoryLightningStore({ watchdog: false });
  const mocks = await Promise.all((options.mocks ?? [{}]).map((m) => startMockLLMServer(m)));
  const taps = options.tap === false ? [] : await Promise.all(mocks.map((m) => startTap(m.url)));
  const upstreams = taps.length ? taps.map((t) => t.url) : mocks.map((m) => m.url);
  const warnings: string[] = [];
  const proxy = new LLMProxy({
    store,
    backends: upstreams.map((url, i) => {
      const model = options.backendModels?.[i];
      return model ? { url: `${url}/v1`, model } : { url: `${url}/v1` };
    }),
    model: "policy",
    captureBodies: true,
    healthCheckIntervalMs: 0,
    backoffBaseMs: 5,
    backoffMaxMs: 20,
    logger: { warn: (m) => warnings.push(m), error: (m) => warnings.push(`error: ${m}`) },
    ...options.proxy,
  });
  const url = await proxy.start();
  return {
    store,
    proxy,
    mocks,
    taps,
    url,
    warnings,
    async newAttempt() {
      const r = await store.startRollout({ input: { q: 1 } });
      return { rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id };
    },
    client(baseURL, o = {}) {
      return new OpenAI({
        baseURL,
        apiKey: o.apiKey ?? "unused",
        defaultHeaders: o.headers,
        maxRetries: o.maxRetries ?? 0,
        timeout: 10_000,
      });
    },
    async spans(rolloutId) {
      await proxy.flush();
      return (await store.querySpans(rolloutId)).items;
    },
    async close() {
      await proxy.stop();
      await Promise.all(taps.map((t) => t.close()));
      await Promise.all(mocks.map((m) => m.close()));
      await store.close();
    },
  };
}

/** Parse an SSE body the way a client would: the JSON payload of each `data:` event, `[DONE]` excluded. */
export function sseEvents(body: string): any[] {
  return body
    .split(/\n\n/)
    .map((block) =>
      block
        .split("\n")
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n"),
    )
    .filter((d) => d && d !== "[DONE]")
    .map((d) => JSON.parse(d));
}

/** The attributes that must agree between a streamed and a non-streamed call (timing and ids excluded). */
export function comparable(attrs: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(attrs)) {
    if (/^agl\.proxy\.(latency_ms|ttft_ms|stream|request|response|body_truncated)$/.test(k)) continue;
    if (k === "gen_ai.response.id" || k === "gen_ai.request.stream") continue;
    // the mock derives tool-call ids from the response id, which differs per call
    out[k] = k.endsWith(".tool_calls") ? JSON.parse(v as string).map(({ id: _, ...call }: any) => call) : v;
  }
  return out;
}
