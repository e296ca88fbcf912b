import { createRng } from "@agl/trainer-gpu";

/**
 * The task: "which is largest of three different digits?". A writer proposes a digit, a checker says
 * whether it is the largest; when the checker says no, the writer answers once more and that answer
 * stands. Generating the answer and judging one are different behaviours asked of the same base with
 * almost the same digits in the prompt: a digit out for the writer, "yes"/"no" out for the checker.
 *
 * Problems are split by their SET of digits (120 sets, each in its 6 orders), so no test problem's digits
 * were ever seen together in training, in any order: the test split measures the rule, not memory.
 */

export interface Problem {
  digits: [number, number, number];
  answer: number;
}

export interface Splits {
  train: Problem[];
  val: Problem[];
  test: Problem[];
}

export function shuffle<T>(xs: readonly T[], next: () => number): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const orders = ([a, b, c]: readonly number[]): Array<[number, number, number]> => [
  [a!, b!, c!],
  [a!, c!, b!],
  [b!, a!, c!],
  [b!, c!, a!],
  [c!, a!, b!],
  [c!, b!, a!],
];

/**
 * The three splits, by digit set: 80 sets for training (480 problems), 20 for validation (the only split
 * settings were chosen on) and 20 for the test (120 problems each). The split is the same for every seed,
 * so all runs are scored on the same test problems.
 */
export function makeSplits(): Splits {
  const sets: number[][] = [];
  for (let a = 0; a < 10; a++)
    for (let b = a + 1; b < 10; b++) for (let c = b + 1; c < 10; c++) sets.push([a, b, c]);
  const mixed = shuffle(sets, createRng(2025));
  const problems = (part: number[][]) =>
    part.flatMap(orders).map((digits) => ({ digits, answer: Math.max(...digits) }));
  return {
    train: problems(mixed.slice(0, 80)),
    val: problems(mixed.slice(80, 100)),
    test: problems(mixed.slice(100, 120)),
  };
}

export const writerPrompt = ({ digits: [a, b, c] }: Problem) => `Which is largest: ${a}, ${b} or ${c}?`;
export const retryPrompt = (proposal: string) => `No, not ${proposal}. Try again.`;
export const checkerPrompt = ({ digits: [a, b, c] }: Problem, proposal: string) =>
  `Is ${proposal} the largest of ${a}, ${b} and ${c}? Answer yes or no.`;

/**
 * A reply without Qwen3's (empty) think block, which the model writes before its answer, nor any stray
 * think tag a sampled reply may hold (the agent quotes the writer's answer back to it).
 */
export const answerText = (reply: string | null | undefined) =>
  (reply ?? "")
    .replace(/^\s*<think>[\s\S]*?<\/think>/, "")
    .replace(/<\/?think>/g, "")
    .trim();

/** The writer's answer: the first digit of its reply, null when it wrote none. */
export function parseProposal(reply: string | null | undefined): number | null {
  const m = answerText(reply).match(/\d/);
  return m ? Number(m[0]) : null;
}

/** The checker rejects only with an explicit "no"; anything else lets the proposal stand. */
export const rejects = (reply: string | null | undefined) => /^no\b/i.test(answerText(reply));

type Message = { role: "user" | "assistant"; content: string };
export interface Demo {
  messages: Message[];
}

/**
 * Format-only warm-up demonstrations (the same for both arms of the comparison): the writer answers with
 * one of the three digits, the largest only `writerSkill` of the time; after "No, not X" it names another
 * of them; the checker judges a proposal that is right half the time and answers "yes"/"no" rightly only
 * `checkerSkill` of the time. They teach the
 * replies' shape and a weak preference; RL has the rest to learn.
 */
export function demonstrations(
  problems: readonly Problem[],
  o: { n: number; writerSkill: number; checkerSkill: number; seed: number },
): Demo[] {
  const next = createRng(o.seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!;
  const out: Demo[] = [];
  for (let i = 0; i < o.n; i++) {
    const p = pick(problems);
    const wrong = p.digits.filter((d) => d !== p.answer);
    const kind = i % 4;
    if (kind === 0 || kind === 1) {
      const said = next() < o.writerSkill ? p.answer : pick(wrong);
      out.push({
        messages: [
          { role: "user", content: writerPrompt(p) },
          { role: "assistant", content: String(said) },
        ],
      });
    } else if (kind === 2) {
      const first = pick(wrong);
      const others = p.digits.filter((d) => d !== first);
      const second = next() < o.writerSkill ? p.answer : pick(others.filter((d) => d !== p.answer));
      out.push({
        messages: [
          { role: "user", content: writerPrompt(p) },
          { role: "assistant", content: String(first) },
          { role: "user", content: retryPrompt(String(first)) },
          { role: "assistant", content: String(second) },
        ],
      });
    } else {
      const proposal = next() < 0.5 ? p.answer : pick(wrong);
      const right = proposal === p.answer;
      const says = next() < o.checkerSkill ? right : !right;
      out.push({
        messages: [
          { role: "user", content: checkerPrompt(p, String(proposal)) },
          { role: "assistant", content: says ? "yes" : "no" },
        ],
      });
    }
  }
  return out;
}
