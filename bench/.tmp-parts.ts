import { SpanSchema } from "@agl/core";
import { buildCallSpan } from "../packages/proxy/src/capture.ts";
const ids = (s: string) => Array.from(s, (c) => c.charCodeAt(0) + 1000);
const reply = "17 * 23 = 391. The answer is 391.";
const prompt = "You are a careful assistant that answers arithmetic questions. What is 17 * 23? Think step by step, then answer with the number only.";
const s = buildCallSpan({
    rolloutId: "r", attemptId: "a", sequenceId: 1, style: "path", mode: null, sessionId: null, isChat: true,
    request: { model: "policy", messages: [{ role: "system", content: "You are..." }, { role: "user", content: "What is" }], max_tokens: 64 },
    clientModel: "anything",
    response: { id: "x", model: "policy", prompt_token_ids: ids(prompt), choices: [{ index: 0, message: { role: "assistant", content: reply }, finish_reason: "stop", token_ids: ids(reply), logprobs: { content: Array.from(reply, (c) => ({ token: c, logprob: -0.5, bytes: [c.charCodeAt(0)], top_logprobs: [] })) } }], usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 } },
    rawResponse: null, httpStatus: 200, error: null, stream: false, partial: false, backend: "b", modelVersion: null, retryCount: 0, startMs: Date.now(), endMs: Date.now(), ttftMs: null,
  } as any, { captureBodies: false, maxBodyChars: 1e6 });
function time(name: string, f: () => unknown) {
  const N = 20000; for (let i = 0; i < 2000; i++) f();
  const t0 = performance.now(); for (let i = 0; i < N; i++) f();
  console.log(name, (((performance.now() - t0) / N) * 1000).toFixed(2), "µs");
}
time("zod parse", () => SpanSchema.parse(s));
time("safeParse", () => SpanSchema.safeParse(s));
time("structuredClone", () => structuredClone(s));
time("json roundtrip", () => JSON.parse(JSON.stringify(s)));
function deep(v: any): any {
  if (typeof v !== "object" || v === null) return v;
  if (Array.isArray(v)) { const out = new Array(v.length); for (let i = 0; i < v.length; i++) out[i] = deep(v[i]); return out; }
  const out: any = {}; for (const k in v) out[k] = deep(v[k]); return out;
}
time("hand deep copy", () => deep(s));
console.log(Object.keys(s.attributes).length, JSON.stringify(s).length);
