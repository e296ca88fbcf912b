/**
 * A stand-in for Python Agent Lightning v0.3's LLMProxy (LiteLLM + its middlewares), enough to run
 * agl-ts agents against it: `/rollout/{rid}/attempt/{aid}/<rest>` is rewritten to `<rest>` (both
 * `/v1/chat/completions` and `/chat/completions`, as LiteLLM serves both), one sequence id is taken
 * from the store per request (POST /v1/agl/spans/next, as the middleware does), `return_token_ids`
 * is added to the upstream body, and a `raw_gen_ai_request` span with the `llm.hosted_vllm.*`
 * attributes as Python-literal strings is written to the store. The real proxy exports that span
 * over OTLP (/v1/traces); this one posts the same span JSON to /v1/agl/spans. No key is required
 * (LiteLLM without a master key).
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface ProxiedCall {
  path: string;
  rolloutId: string | null;
  attemptId: string | null;
  sequenceId: number | null;
  status: number;
}

export interface PythonLLMProxy {
  /** What `LLMProxy.as_resource()` publishes as the ProxyLLM endpoint (no /v1). */
  url: string;
  calls: ProxiedCall[];
  close(): Promise<void>;
}

/** A JSON value as Python's repr() prints it (what LiteLLM's span attributes hold). */
export function pythonRepr(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return String(value);
  if (typeof value === "string")
    return `'${value.replace(/\\/g, "\\\\").replace(/'/g, "\\'").replace(/\n/g, "\\n")}'`;
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(", ")}]`;
  return `{${Object.entries(value as Record<string, unknown>)
    .map(([k, v]) => `${pythonRepr(k)}: ${pythonRepr(v)}`)
    .join(", ")}}`;
}

async function storePost(storeUrl: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(`${storeUrl}/v1/agl/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`store ${path}: HTTP ${res.status} ${await res.text()}`);
  return res.json();
}

export async function startPythonLLMProxy(options: {
  storeUrl: string;
  upstream: string;
}): Promise<PythonLLMProxy> {
  const calls: ProxiedCall[] = [];
  const upstream = options.upstream.replace(/\/+$/, "");
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const original = new URL(req.url ?? "/", "http://x").pathname;
    const match = /^\/rollout\/([^/]+)\/attempt\/([^/]+)(\/.*)?$/.exec(original);
    const rest = match ? (match[3] ?? "/") : original;
    const call: ProxiedCall = {
      path: original,
      rolloutId: match ? decodeURIComponent(match[1]!) : null,
      attemptId: match ? decodeURIComponent(match[2]!) : null,
      sequenceId: null,
      status: 0,
    };
    calls.push(call);
    const reply = (status: number, body: unknown) => {
      call.status = status;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (!/^(\/v1)?\/chat\/completions$/.test(rest) || req.method !== "POST") {
      return reply(404, { error: { message: `not served here: ${rest}` } });
    }
    try {
      if (call.rolloutId && call.attemptId) {
        const next = await storePost(options.storeUrl, "spans/next", {
          rollout_id: call.rolloutId,
          attempt_id: call.attemptId,
        });
        call.sequenceId = next.sequence_id;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const started = Date.now() / 1000;
      const up = await fetch(`${upstream}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...body, stream: false, return_token_ids: true }),
      });
      const answer = await up.json();
      if (call.rolloutId && call.attemptId && up.ok) {
        const traceId = randomBytes(16).toString("hex");
        await storePost(options.storeUrl, "spans", {
          rollout_id: call.rolloutId,
          attempt_id: call.attemptId,
          sequence_id: call.sequenceId,
          trace_id: traceId,
          span_id: randomBytes(8).toString("hex"),
          parent_id: null,
          name: "raw_gen_ai_request",
          status: { status_code: "OK", description: null },
          attributes: {
            "llm.hosted_vllm.id": answer.id,
            "llm.hosted_vllm.prompt_token_ids": pythonRepr(answer.prompt_token_ids ?? []),
            "llm.hosted_vllm.choices": pythonRepr(answer.choices),
          },
          events: [],
          links: [],
          start_time: started,
          end_time: Date.now() / 1000,
          context: null,
          parent: null,
          resource: { attributes: { "service.name": "litellm" }, schema_url: "" },
        });
      }
      reply(up.status, answer);
    } catch (error) {
      reply(500, { error: { message: (error as Error).message } });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
