import type { CausalLM, ChatEncoder, ChatMessage, ToolDefinition } from "@agl/trainer-gpu";
import { chainedSolution, type Problem } from "./dataset.js";

/**
 * A fast view of whether SFT is learning to copy numbers: teacher-forced accuracy of the model's most
 * likely next token on the digits of perfect two-call solutions of held-out problems. Greedy episodes show
 * the same thing only once every digit is right; this shows the copying being learnt digit by digit, in
 * one forward pass over a few dozen transcripts.
 *
 * Digits are grouped by what producing them takes: `first` the operands of the first call (copied from
 * the question), `carried` the first operand of the second call (the first call's result, copied from the
 * tool message), `second` the other operand of the second call (copied from the question), `answer` the
 * final answer (copied from the second tool message).
 */

export interface CopyAccuracy {
  first: number;
  carried: number;
  second: number;
  answer: number;
  /** Every digit of the three replies. */
  all: number;
}

type Group = Exclude<keyof CopyAccuracy, "all">;

const isDigit = (s: string) => /^\d+$/.test(s);

/** Which group each digit target of a chained transcript belongs to (null: not a digit). */
export function digitGroups(pieces: readonly string[], mask: readonly number[]): (Group | null)[] {
  const groups: (Group | null)[] = pieces.map(() => null);
  let reply = -1;
  let afterOp = false;
  for (let t = 0; t < pieces.length; t++) {
    if (!mask[t]) continue;
    if (t === 0 || !mask[t - 1]) {
      reply += 1;
      afterOp = false;
    }
    const piece = pieces[t]!;
    if (/^[-+*]$/.test(piece)) afterOp = true;
    if (!isDigit(piece)) continue;
    groups[t] = reply === 0 ? "first" : reply === 1 ? (afterOp ? "second" : "carried") : "answer";
  }
  return groups;
}

export function copyAccuracy(
  model: CausalLM,
  template: ChatEncoder,
  problems: readonly Problem[],
  batchSize = 16,
  /** Render the transcripts with the tool preamble (as served) or without it (the short-row stage). */
  withTools = true,
): CopyAccuracy {
  const hits: Record<Group, [number, number]> = {
    first: [0, 0],
    carried: [0, 0],
    second: [0, 0],
    answer: [0, 0],
  };
  const transcripts = problems.map((p) => {
    const d = chainedSolution(p);
    return { messages: d.messages, tools: withTools ? d.tools : null };
  });
  for (const { pieces, mask, hit } of teacherForced(model, template, transcripts, batchSize)) {
    digitGroups(pieces, mask).forEach((g, t) => {
      if (!g) return;
      hits[g][1] += 1;
      if (hit[t]) hits[g][0] += 1;
    });
  }
  const rate = ([a, n]: [number, number]) => (n ? a / n : 0);
  const total = Object.values(hits).reduce<[number, number]>((s, [a, n]) => [s[0] + a, s[1] + n], [0, 0]);
  return {
    first: rate(hits.first),
    carried: rate(hits.carried),
    second: rate(hits.second),
    answer: rate(hits.answer),
    all: rate(total),
  };
}

/** One transcript as scored teacher-forced: its token strings, assistant mask and whether each was the argmax. */
export interface ScoredRow {
  pieces: string[];
  mask: number[];
  /** `hit[t]`: the most likely token after `t` tokens was token `t` (false at t = 0). */
  hit: boolean[];
}

/** Teacher-forced argmax hits of `model` on each transcript (one forward pass per `batchSize` of them). */
export function teacherForced(
  model: CausalLM,
  template: ChatEncoder,
  transcripts: readonly { messages: unknown[]; tools: unknown[] | null }[],
  batchSize = 16,
): ScoredRow[] {
  const tok = template.tokenizer;
  const out: ScoredRow[] = [];
  for (let i = 0; i < transcripts.length; i += batchSize) {
    const rows = transcripts.slice(i, i + batchSize).map((d) =>
      template.encodeChat(
        d.messages as ChatMessage[],
        d.tools?.length ? (d.tools as ToolDefinition[]) : null,
        {
          addGenerationPrompt: false,
        },
      ),
    );
    const T = Math.max(...rows.map((r) => r.ids.length));
    const ids = rows.map((r) => [...r.ids, ...new Array<number>(T - r.ids.length).fill(0)]);
    const attention = rows.map((r) => [
      ...new Array<number>(r.ids.length).fill(1),
      ...new Array<number>(T - r.ids.length).fill(0),
    ]);
    const logits = model.logits(ids, attention);
    const best = logits.argMax(-1);
    const predicted = best.arraySync() as number[][];
    logits.dispose();
    best.dispose();
    rows.forEach((r, b) => {
      out.push({
        pieces: r.ids.map((id) => tok.decode([id], { skipSpecialTokens: false })),
        mask: r.assistantMask,
        hit: r.ids.map((id, t) => t > 0 && predicted[b]![t - 1] === id),
      });
    });
  }
  return out;
}

/**
 * Teacher-forced accuracy on the digits the assistant writes in `transcripts`. In the base corpus
 * (src/base-corpus.ts) every such digit is copied from the context, so this is its copy accuracy.
 */
export function assistantDigitAccuracy(
  model: CausalLM,
  template: ChatEncoder,
  transcripts: readonly { messages: unknown[]; tools: unknown[] | null }[],
  batchSize = 16,
): number {
  let hits = 0;
  let total = 0;
  for (const { pieces, mask, hit } of teacherForced(model, template, transcripts, batchSize)) {
    pieces.forEach((piece, t) => {
      if (!mask[t] || !isDigit(piece)) return;
      total += 1;
      if (hit[t]) hits += 1;
    });
  }
  return total ? hits / total : 0;
}
