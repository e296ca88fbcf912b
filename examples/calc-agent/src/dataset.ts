import { SeededRandom } from "@agl/trainer-gpu";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";

/**
 * Arithmetic word problems: "Ann has 37 pens, gets 48 more. How many?". Every problem needs
 * one operation on two numbers too large for a tiny model to do in its head, so the reliable way to
 * solve it is to call the calculator and copy the result. Train and validation splits never share an
 * (operation, a, b) triple.
 */

export type Op = "+" | "-" | "*";

export interface Problem {
  id: string;
  question: string;
  answer: number;
  op: Op;
  a: number;
  b: number;
}

const NAMES = ["Ann", "Bob", "Sue", "Tom", "Kim", "Max"];
const ITEMS = ["pens", "cups", "eggs", "cards", "books"];

export const CALCULATOR_TOOL: ChatCompletionTool = {
  type: "function",
  function: {
    name: "calculator",
    description: "Evaluate an arithmetic expression with + - * / and parentheses.",
    // Short names on purpose: the tokenizer is character-level, so every character is a token the tiny
    // model has to read and write.
    parameters: {
      type: "object",
      properties: { expr: { type: "string", description: "e.g. 37+48" } },
      required: ["expr"],
    },
  },
};

function makeProblem(rng: SeededRandom): Problem {
  const name = NAMES[rng.int(NAMES.length)]!;
  const item = ITEMS[rng.int(ITEMS.length)]!;
  const op = (["+", "-", "*"] as const)[rng.int(3)]!;
  if (op === "+") {
    const a = 10 + rng.int(190);
    const b = 10 + rng.int(190);
    return {
      id: "",
      op,
      a,
      b,
      answer: a + b,
      question: `${name} has ${a} ${item}, gets ${b} more. How many?`,
    };
  }
  if (op === "-") {
    const a = 30 + rng.int(170);
    const b = 10 + rng.int(a - 19);
    return {
      id: "",
      op,
      a,
      b,
      answer: a - b,
      question: `${name} has ${a} ${item}, gives ${b} away. How many left?`,
    };
  }
  const a = 3 + rng.int(7);
  const b = 12 + rng.int(88);
  return {
    id: "",
    op,
    a,
    b,
    answer: a * b,
    question: `${name} buys ${a} boxes of ${b} ${item}. How many?`,
  };
}

export interface Splits {
  /** RL prompts. */
  train: Problem[];
  /** Problems the warm-start demonstrations are written for. */
  demo: Problem[];
  /** Held out, for choosing the best SFT checkpoint and for the RL curve. */
  val: Problem[];
  /** Held out, for the final numbers only: never used to choose anything. */
  test: Problem[];
}

/**
 * The identity of a problem for keeping splits apart: the operation and its operands, in sorted order
 * for + and * (so "37+48" and its commuted twin "48+37" are the same problem).
 */
export function problemKey(p: Pick<Problem, "op" | "a" | "b">): string {
  const [x, y] = p.op === "-" ? [p.a, p.b] : [Math.min(p.a, p.b), Math.max(p.a, p.b)];
  return `${p.op}${x},${y}`;
}

/** `n` problems drawn from `rng` whose keys are not in `taken` (which gains them), ids `<prefix>-<i>`. */
function drawNew(rng: SeededRandom, taken: Set<string>, n: number, prefix: string): Problem[] {
  const out: Problem[] = [];
  while (out.length < n) {
    const p = makeProblem(rng);
    const key = problemKey(p);
    if (taken.has(key)) continue;
    taken.add(key);
    out.push({ ...p, id: `${prefix}-${out.length}` });
  }
  return out;
}

/** Disjoint splits: no problem (up to commuting + and *) appears in two splits or twice in one. */
export function makeSplits(
  sizes: { train: number; demo: number; val: number; test: number },
  seed: number,
): Splits {
  const rng = new SeededRandom(seed);
  const seen = new Set<string>();
  const test = drawNew(rng, seen, sizes.test, "test");
  const val = drawNew(rng, seen, sizes.val, "val");
  return {
    test,
    val,
    train: drawNew(rng, seen, sizes.train, "train"),
    demo: drawNew(rng, seen, sizes.demo, "demo"),
  };
}

/**
 * `n` new problems from their own seed, none of them (up to commuting) in `splits`: a test set drawn after
 * every setting was fixed, for checking that the test split proper was not tuned on.
 */
export function freshProblems(splits: Splits, n: number, seed: number): Problem[] {
  const taken = new Set([...splits.train, ...splits.demo, ...splits.val, ...splits.test].map(problemKey));
  return drawNew(new SeededRandom(seed), taken, n, "fresh");
}

export function expressionOf(p: Problem): string {
  return `${p.a}${p.op}${p.b}`;
}

/**
 * The tokenizer's vocabulary: every character the agent, the tool and the model's outputs can contain,
 * plus multi-character pieces — the numbers 10-999 (so copying a number into a tool call, or a result
 * into the answer, is copying one token, as in BPE vocabularies that keep up to three digits together)
 * and every word of two or more letters in the questions and the tool-call format.
 */
export function vocabulary(problems: readonly Problem[]): { chars: string; pieces: string[] } {
  const words = new Set<string>();
  for (const text of [
    ...problems.map((p) => p.question),
    JSON.stringify({ name: "calculator", arguments: { expr: "1" } }),
    "I think",
  ]) {
    for (const w of text.match(/[A-Za-z]{2,}/g) ?? []) words.add(w);
  }
  const numbers = Array.from({ length: 990 }, (_, i) => String(i + 10));
  return { chars: alphabet(problems), pieces: [...numbers, ...[...words].sort()] };
}

/** Every character the agent, the tool and the model's outputs can contain (the tokenizer's alphabet). */
export function alphabet(problems: readonly Problem[]): string {
  const chars = new Set<string>('0123456789+-*/().,:?"{}[]_ -=');
  for (const text of [
    ...problems.map((p) => p.question),
    JSON.stringify({ name: "calculator", arguments: { expr: "1" } }),
    "calculator(expr)",
    "I think 1+2 = 3.",
    "error",
  ]) {
    for (const ch of text) chars.add(ch);
  }
  for (const ch of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") chars.add(ch);
  return [...chars].join("");
}

export interface Demo {
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionTool[];
}

/**
 * Warm-start transcripts, imperfect the way real demonstrations are: only `toolShare` of them use the
 * calculator; the rest work the answer out in the head ("I think 35+96 = 131.", always right), which a
 * tiny model cannot learn to compute. Both kinds write the expression, so copying numbers out of the
 * question is learnt from every demonstration; what SFT cannot learn from them is that the tool is the
 * reliable way to the result. The direct answers share one opening token on purpose: with `toolShare`
 * < 0.5 the greedy policy then prefers answering outright over the tool (a leading number would spread that
 * mass over many tokens and let the single `<tool_call>` token win the argmax).
 */
export function demonstrations(problems: readonly Problem[], toolShare: number, seed: number): Demo[] {
  const rng = new SeededRandom(seed);
  return problems.map((p, i) => {
    const user: ChatCompletionMessageParam = { role: "user", content: p.question };
    if (rng.next() >= toolShare) {
      return {
        tools: [CALCULATOR_TOOL],
        messages: [user, { role: "assistant", content: `I think ${expressionOf(p)} = ${p.answer}.` }],
      };
    }
    const id = `call_${i}`;
    return {
      tools: [CALCULATOR_TOOL],
      messages: [
        user,
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id,
              type: "function",
              function: { name: "calculator", arguments: JSON.stringify({ expr: expressionOf(p) }) },
            },
          ],
        },
        { role: "tool", tool_call_id: id, content: String(p.answer) },
        { role: "assistant", content: String(p.answer) },
      ],
    };
  });
}
