import { llm } from "@agl/core";
import { type PolicyBundle, type ServeFn, servePolicy } from "@agl/trainer-gpu";
import OpenAI from "openai";
import { MAX_REPLY_TOKENS, type Roles, solve } from "./agent.js";
import { checkerPrompt, type Problem, rejects } from "./task.js";

/**
 * Held-out scores, outside training: the unchanged agent against the policy served directly (no store, no
 * proxy), each role asking for the model name its adapter is served under.
 */

export interface RoleScores {
  /** Episodes whose answer that stands is right: the task's accuracy. */
  accuracy: number;
  /** The writer's first proposal is right. */
  writer: number;
  /** The checker's verdict on the writer's proposal is right. */
  checker: number;
  /** Share of episodes where the checker sent the proposal back. */
  rejected: number;
  /**
   * The checker alone on fixed proposals: each problem asked once with its largest digit (right: "yes")
   * and once with another of its digits (right: "no"); the mean of the two rates, so saying always "yes"
   * or always "no" scores 50%.
   */
  checkerBalanced: number;
  n: number;
}

export interface EvalOptions {
  temperature: number;
  seed: number;
  /** Served model name of each role's adapter (`writer`/`checker`, or `shared` for both). */
  models: { writer: string; checker: string };
  serve?: ServeFn;
}

const rate = (xs: readonly boolean[]) => xs.filter(Boolean).length / xs.length;

export async function evaluateRoles(
  policy: PolicyBundle,
  problems: readonly Problem[],
  o: EvalOptions,
): Promise<RoleScores> {
  const server = await (o.serve ?? servePolicy)(policy, { modelName: "base" });
  try {
    const resource = (model: string) =>
      llm({
        endpoint: server.url,
        model,
        ...(server.apiKey ? { api_key: server.apiKey } : {}),
        sampling_parameters: { temperature: o.temperature },
      });
    const roles: Roles = { writer: resource(o.models.writer), checker: resource(o.models.checker) };
    const client = new OpenAI({ baseURL: server.url, apiKey: server.apiKey ?? "none", maxRetries: 6 });
    const verdict = async (p: Problem, proposal: number, seed: number) => {
      const res = await client.chat.completions.create({
        model: o.models.checker,
        messages: [{ role: "user", content: checkerPrompt(p, String(proposal)) }],
        temperature: o.temperature,
        max_tokens: MAX_REPLY_TOKENS,
        seed,
      });
      return res.choices[0]?.message.content ?? "";
    };
    const base = o.seed * 100_003;
    const [episodes, accepts, refuses] = await Promise.all([
      Promise.all(problems.map((p, i) => solve(p, roles, base + i))),
      Promise.all(problems.map(async (p, i) => !rejects(await verdict(p, p.answer, base + 7 * i + 1)))),
      Promise.all(
        problems.map(async (p, i) => {
          const wrong = p.digits.filter((d) => d !== p.answer)[i % 2]!;
          return rejects(await verdict(p, wrong, base + 7 * i + 2));
        }),
      ),
    ]);
    return {
      accuracy: rate(episodes.map((e) => e.correct)),
      writer: rate(episodes.map((e) => e.writerRight)),
      checker: rate(episodes.map((e) => e.checkerRight)),
      rejected: rate(episodes.map((e) => e.rejected)),
      checkerBalanced: (rate(accepts) + rate(refuses)) / 2,
      n: problems.length,
    };
  } finally {
    await server.close();
  }
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
export const describeScores = (s: RoleScores) =>
  `accuracy ${pct(s.accuracy)} (writer first proposal ${pct(s.writer)}, checker verdict ${pct(s.checker)}, sent back ${pct(s.rejected)}, checker on fixed proposals ${pct(s.checkerBalanced)})`;
