import type { Span } from "@agl/core";
import { TraceToTriplets } from "@agl/adapter";
const CALLS = 10;
function span(rollout: string, id: string, parent: string | null, name: string, start: number, end: number, attributes: Record<string, any>, seq = 0): Span {
  return {
    rollout_id: rollout,
    attempt_id: "at-1",
    sequence_id: seq,
    trace_id: "0".repeat(32),
    span_id: id,
    parent_id: parent,
    name,
    status: { status_code: "OK", description: null },
    attributes,
    events: [],
    links: [],
    start_time: start,
    end_time: end,
    context: null,
    parent: null,
    resource: { attributes: {}, schema_url: "" },
  };
}

/** One rollout: agent root, per turn an LLM call (prompt extends the previous context) and a tool span, a final reward. */
function rollout(r: number, proxy: boolean): Span[] {
  const rid = `ro-${r}`;
  const spans: Span[] = [span(rid, `${rid}-root`, null, "agent.run", 0, 1000, { "agent.name": "solver" })];
  let context: number[] = Array.from({ length: 40 }, (_, i) => 1000 + ((r + i) % 500));
  for (let c = 0; c < CALLS; c++) {
    const response = Array.from({ length: 20 }, (_, i) => 2000 + ((r * 7 + c * 13 + i) % 900));
    const t = c * 90 + 10;
    const attributes: Record<string, any> = {
      "gen_ai.request.model": "policy",
      "gen_ai.request.temperature": 1,
      "gen_ai.response.id": `chatcmpl-${r}-${c}`,
      "gen_ai.response.model": "policy",
      "gen_ai.prompt.0.role": "system",
      "gen_ai.prompt.0.content": "You are a careful solver.",
      "gen_ai.prompt.1.role": "user",
      "gen_ai.prompt.1.content": `task ${r} turn ${c}`,
      "gen_ai.completion.0.role": "assistant",
      "gen_ai.completion.0.content": `answer ${c}`,
      "gen_ai.completion.0.finish_reason": "stop",
      "gen_ai.usage.prompt_tokens": context.length,
      "gen_ai.usage.completion_tokens": response.length,
      prompt_token_ids: context,
      response_token_ids: response,
      "agl.response_logprobs": response.map((_, i) => -((i % 10) + 1) / 20),
    };
    spans.push(span(rid, `${rid}-c${c}`, proxy ? null : `${rid}-root`, "openai.chat.completion", t, t + 40, attributes, c + 1));
    if (!proxy) spans.push(span(rid, `${rid}-t${c}`, `${rid}-root`, "tool.execute", t + 45, t + 60, { "tool.name": "calc" }));
    context = [...context, ...response, 3000 + c, 3001 + c];
  }
  spans.push(
    span(rid, `${rid}-reward`, proxy ? null : `${rid}-root`, "agentlightning.annotation", 990, 991, {
      "agentlightning.reward.0.name": "primary",
      "agentlightning.reward.0.value": r % 2,
    }, CALLS + 1),
  );
  return spans;
}

const data = Array.from({length: 2000}, (_, r) => rollout(r, false));
const a = new TraceToTriplets();
for (const s of data.slice(0, 200)) a.adapt(s);
const c0 = process.cpuUsage(); const t0 = performance.now();
for (const s of data) a.adapt(s);
const cu = process.cpuUsage(c0); console.log("wall ms", (performance.now() - t0).toFixed(0), "cpu ms", ((cu.user + cu.system)/1000).toFixed(0));
