import { InMemoryLightningStore } from "@agl/core";
import { buildCallSpan } from "../packages/proxy/src/capture.ts";
const store = new InMemoryLightningStore({ watchdog: false } as any);
const r = await store.startRollout({ input: { i: 1 } });
const ids = (s: string) => Array.from(s, (c) => c.charCodeAt(0) + 1000);
const reply = "17 * 23 = 391. The answer is 391.";
const prompt = "You are a careful assistant that answers arithmetic questions. What is 17 * 23? Think step by step, then answer with the number only.";
function mk(seq: number) {
  return buildCallSpan({
    rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id, sequenceId: seq, style: "path", mode: null, sessionId: null, isChat: true,
    request: { model: "policy", messages: [{ role: "system", content: "You are..." }, { role: "user", content: "What is" }], max_tokens: 64, return_token_ids: true, logprobs: true },
    clientModel: "anything",
    response: { id: "x", model: "policy", prompt_token_ids: ids(prompt), choices: [{ index: 0, message: { role: "assistant", content: reply }, finish_reason: "stop", token_ids: ids(reply), logprobs: { content: Array.from(reply, (c) => ({ token: c, logprob: -0.5, bytes: [c.charCodeAt(0)], top_logprobs: [] })) } }], usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 } },
    rawResponse: null, httpStatus: 200, error: null, stream: false, partial: false, backend: "b", modelVersion: null, retryCount: 0, startMs: Date.now(), endMs: Date.now(), ttftMs: null,
  } as any, { captureBodies: false, maxBodyChars: 1e6 });
}
const N = 20000;
let seq = 1;
for (const mode of ["single", "batch32"]) {
  for (let rep = 0; rep < 2; rep++) {
    const spans = Array.from({ length: N }, () => mk(seq++));
    const t0 = performance.now();
    if (mode === "single") for (const s of spans) await store.addSpan(s);
    else for (let i = 0; i < N; i += 32) await store.addManySpans(spans.slice(i, i + 32));
    console.log(mode, (((performance.now() - t0) / N) * 1000).toFixed(1), "µs/span");
  }
}
const t0 = performance.now();
for (let i = 0; i < N; i++) mk(seq++);
console.log("buildCallSpan", (((performance.now() - t0) / N) * 1000).toFixed(1), "µs/span");
