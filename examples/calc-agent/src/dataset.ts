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
    const a = 10 + rng.int(90);
    const b = 10 + rng.int(90);
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
    const a = 30 + rng.int(70);
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
  /** Problems the warm-start demonstrations are written for (disjoint from validation). */
  demo: Problem[];
  /** Held out: no (op, a, b) triple appears in train or demo. */
  val: Problem[];
}

export function makeSplits(sizes: { train: number; demo: number; val: number }, seed: number): Splits {
  const rng = new SeededRandom(seed);
  const seen = new Set<string>();
  const take = (n: number, prefix: string): Problem[] => {
    const out: Problem[] = [];
    while (out.length < n) {
      const p = makeProblem(rng);
      const key = `${p.op}${p.a},${p.b}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ ...p, id: `${prefix}-${out.length}` });
    }
    return out;
  };
  const val = take(sizes.val, "val");
  return { val, train: take(sizes.train, "train"), demo: take(sizes.demo, "demo") };
}

export function expressionOf(p: Problem): string {
  return `${p.a}${p.op}${p.b}`;
}

/** Every character the agent, the tool and the model's outputs can contain (the tokenizer's alphabet). */
export function alphabet(problems: readonly Problem[]): string {
  const chars = new Set<string>('0123456789+-*/().,:?"{}[]_ -');
  for (const text of [
    ...problems.map((p) => p.question),
    JSON.stringify({ name: "calculator", arguments: { expr: "1" } }),
    "calculator(expr)",
    "It is",
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
 * Warm-start transcripts. Only `toolShare` of them show the calculator; the rest answer directly
 * ("It is 85.") with the right number, which a tiny model cannot learn to compute — so after SFT it
 * mostly guesses, sometimes calls the tool, and RL has to discover that calling the tool is what pays.
 * The direct answers share one opening token on purpose: with `toolShare` < 0.5 the greedy policy then
 * prefers guessing over the tool (bare numbers would spread that mass over ten digits and let the single
 * `<tool_call>` token win the argmax), so greedy accuracy after the warm start is low.
 */
export function demonstrations(problems: readonly Problem[], toolShare: number, seed: number): Demo[] {
  const rng = new SeededRandom(seed);
  return problems.map((p, i) => {
    const user: ChatCompletionMessageParam = { role: "user", content: p.question };
    if (rng.next() >= toolShare) {
      return {
        tools: [CALCULATOR_TOOL],
        messages: [user, { role: "assistant", content: `It is ${p.answer}.` }],
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
