/**
 * The task of bench/async-ppo.ts: answer with the prompt's letter. A prompt is "a" or "b" repeated; the
 * reply (6 tokens) earns the share of its tokens equal to that letter, and counts as a success only when
 * all six are. The untrained policy mostly ends its reply early (reward about 0.06); learning which
 * letter to repeat takes the whole budget (the curve is still rising at the end). Problems whose answer
 * is "b" need `SLOW_CALLS` tool calls, the others one; each call waits 0.1-0.5 s (80%) or 1-2 s (20%),
 * drawn from the rollout's seed, so every staleness level sees the same latencies for the same rollout.
 * Slow problems are therefore a fixed half of the data: training that favoured fast rollouts would learn
 * "a" sooner than "b", which the held-out accuracy per answer shows.
 */
import { rollout } from "@agl/core";
import { ChatTemplate, Generator, type PolicyModel, SeededRandom, Tokenizer } from "@agl/trainer-gpu";
import OpenAI from "openai";

export type Task = { prompt: string };
export const tokenizer = new Tokenizer({ chars: "ab" });
export const template = new ChatTemplate(tokenizer);
export const REPLY_TOKENS = 6;
export const SLOW_CALLS = 3;

export const answerOf = (t: Task): string => t.prompt.at(-1)!;
export const toolCallsOf = (t: Task): number => (answerOf(t) === "b" ? SLOW_CALLS : 1);

/** Share of the reply that is the answer letter (the reward), over exactly `REPLY_TOKENS` tokens. */
export function score(task: Task, reply: string): number {
  const want = answerOf(task);
  return [...reply.slice(0, REPLY_TOKENS)].filter((ch) => ch === want).length / REPLY_TOKENS;
}

/**
 * Prompts are one letter repeated: lengths 1-3, 5 and 6 for training (10 prompts, repeated to 40), 4 and
 * 7 held out (4 prompts: an answer is learnt per letter, and the held-out lengths test that it does not
 * hang on the lengths seen in training).
 */
export function splits(): { train: Task[]; heldOut: Task[] } {
  const of = (lengths: number[]) =>
    lengths.flatMap((n) => ["a", "b"].map((ch) => ({ prompt: ch.repeat(n) })));
  const train = of([1, 2, 3, 5, 6]);
  return { train: [...train, ...train, ...train, ...train], heldOut: of([4, 7]) };
}

/** Simulated latency of tool call `call` of a rollout (seconds), from the rollout's seed. */
export function toolSeconds(seed: number, call: number): number {
  const rng = new SeededRandom(seed * 7919 + call);
  return rng.next() < 0.8 ? 0.1 + 0.4 * rng.next() : 1 + rng.next();
}

/** What the bench samples while runs go: agents running and LLM calls in flight. */
export interface Activity {
  running: number;
  calls: number;
}

export function makeAgent(activity: Activity, toolScale: number) {
  return rollout<Task>(async (task, { llm, rollout: r }) => {
    activity.running++;
    try {
      const meta = r.metadata as { seed: number };
      const client = new OpenAI({ baseURL: llm!.endpoint, apiKey: llm!.api_key ?? "none", maxRetries: 6 });
      activity.calls++;
      let text = "";
      try {
        const res = await client.chat.completions.create({
          model: llm!.model,
          messages: [{ role: "user", content: task.prompt }],
          max_tokens: REPLY_TOKENS,
          temperature: llm!.sampling_parameters.temperature as number,
          seed: meta.seed,
        });
        text = res.choices[0]!.message.content ?? "";
      } finally {
        activity.calls--;
      }
      for (let call = 0; call < toolCallsOf(task) && toolScale > 0; call++)
        await new Promise((resolve) => setTimeout(resolve, toolScale * toolSeconds(meta.seed, call) * 1000));
      return score(task, text);
    } finally {
      activity.running--;
    }
  });
}

/**
 * Held-out accuracy of the trained weights, overall and per answer: `samples` replies per prompt at
 * temperature 1 (fixed seeds), decoded in this process from a snapshot of `model`.
 */
export async function heldOutAccuracy(
  model: PolicyModel,
  heldOut: readonly Task[],
  samples: number,
): Promise<{ accuracy: number; a: number; b: number; reward: number }> {
  const snapshot = model.clone({ trainable: false });
  try {
    const generator = new Generator(snapshot, tokenizer);
    const results = await Promise.all(
      heldOut.map(async (task, i) => {
        const promptIds = template.encodeChat([{ role: "user", content: task.prompt }]).ids;
        const out = await generator.generateMany(
          Array.from({ length: samples }, (_, j) => ({
            promptIds,
            maxTokens: REPLY_TOKENS,
            temperature: 1,
            seed: 100_000 + i * samples + j,
          })),
        );
        return out.map((o) => ({ answer: answerOf(task), reward: score(task, o.text) }));
      }),
    );
    const flat = results.flat();
    const acc = (xs: typeof flat) => xs.filter((x) => x.reward === 1).length / Math.max(1, xs.length);
    return {
      accuracy: acc(flat),
      a: acc(flat.filter((x) => x.answer === "a")),
      b: acc(flat.filter((x) => x.answer === "b")),
      reward: flat.reduce((s, x) => s + x.reward, 0) / flat.length,
    };
  } finally {
    snapshot.dispose();
  }
}
