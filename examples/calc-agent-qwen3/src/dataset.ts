import { SeededRandom } from "@agl/trainer-gpu";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";

/**
 * Two-step arithmetic word problems: "Ann buys 7 boxes of 48 pens, then gives 95 away. How many left?".
 * The calculator does one operation per call, so each problem takes two calls chained: the first result
 * (a multi-digit number, several tokens) has to be copied into the second call. Splits never share a
 * problem.
 */

export type Op = "+" | "-" | "*";

export interface Step {
  op: Op;
  a: number;
  b: number;
}

export interface Problem {
  id: string;
  question: string;
  answer: number;
  /** The two operations in order; the second one's `a` is the first one's result. */
  steps: [Step, Step];
}

const NAMES = ["Ann", "Bob", "Sue", "Tom", "Kim", "Max"];
const ITEMS = ["pens", "cups", "eggs", "cards", "books"];

/**
 * The tool as the request offers it. No digits in its schema: the chat template renders it into every
 * prompt, and a number there (an example like "72-17") is one more number the model can learn to copy
 * into its calls instead of the question's.
 */
export const CALCULATOR_TOOL: ChatCompletionTool = {
  type: "function",
  function: {
    name: "calculator",
    description: "One operation (a+b, a-b or a*b) on two whole numbers.",
    parameters: {
      type: "object",
      properties: { expr: { type: "string" } },
      required: ["expr"],
    },
  },
};

const apply = (op: Op, a: number, b: number) => (op === "+" ? a + b : op === "-" ? a - b : a * b);

function makeProblem(rng: SeededRandom): Omit<Problem, "id"> {
  const name = NAMES[rng.int(NAMES.length)]!;
  const item = ITEMS[rng.int(ITEMS.length)]!;
  const kind = rng.int(4);
  let first: Step;
  let lead: string;
  if (kind < 2) {
    first = { op: "*", a: 3 + rng.int(7), b: 12 + rng.int(88) };
    lead = `${name} buys ${first.a} boxes of ${first.b} ${item}`;
  } else if (kind === 2) {
    first = { op: "+", a: 10 + rng.int(190), b: 10 + rng.int(190) };
    lead = `${name} has ${first.a} ${item}, gets ${first.b} more`;
  } else {
    const a = 60 + rng.int(140);
    first = { op: "-", a, b: 10 + rng.int(a - 40) };
    lead = `${name} has ${first.a} ${item}, gives ${first.b} away`;
  }
  const mid = apply(first.op, first.a, first.b);
  // Then one of: give some away (x*y-z, x+y-z) or get more (x*y+z, x-y+z); the first result comes first.
  const giveAway = kind === 0 || kind === 2;
  const second: Step = giveAway
    ? { op: "-", a: mid, b: 10 + rng.int(Math.max(1, Math.min(190, mid - 19))) }
    : { op: "+", a: mid, b: 10 + rng.int(190) };
  const tail =
    second.op === "-"
      ? `then gives ${second.b} away. How many left?`
      : `then gets ${second.b} more. How many?`;
  return {
    question: `${lead}, ${tail}`,
    answer: apply(second.op, second.a, second.b),
    steps: [first, second],
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

/** The identity of a problem for keeping splits apart: its question without the name and the item. */
export function problemKey(p: Pick<Problem, "steps">): string {
  const [s, t] = p.steps;
  return `${s.a}${s.op}${s.b}${t.op}${t.b}`;
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

/** Disjoint splits: no problem appears in two splits or twice in one. */
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

export const expressionOf = (s: Step) => `${s.a}${s.op}${s.b}`;

export interface Demo {
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionTool[];
}

function call(id: string, s: Step): ChatCompletionMessageParam[] {
  return [
    {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id,
          type: "function",
          function: { name: "calculator", arguments: JSON.stringify({ expr: expressionOf(s) }) },
        },
      ],
    },
    { role: "tool", tool_call_id: id, content: String(apply(s.op, s.a, s.b)) },
  ];
}

/**
 * Warm-start transcripts, imperfect the way real demonstrations are. Every one does the first step with
 * the calculator; only `chainShare` of them do the second step with it too and copy its result. The rest
 * do the second step in the head ("I think 336-95 = 241.", always right), which a tiny model cannot learn
 * to compute: it learns to copy the first result into an expression, not that the calculator is the way
 * to finish.
 */
export function demonstrations(problems: readonly Problem[], chainShare: number, seed: number): Demo[] {
  const rng = new SeededRandom(seed);
  return problems.map((p, i) => {
    const [first, second] = p.steps;
    const messages: ChatCompletionMessageParam[] = [
      { role: "user", content: p.question },
      ...call(`call_${i}_1`, first),
    ];
    if (rng.next() < chainShare) {
      messages.push(...call(`call_${i}_2`, second), { role: "assistant", content: String(p.answer) });
    } else {
      messages.push({ role: "assistant", content: `I think ${expressionOf(second)} = ${p.answer}.` });
    }
    return { tools: [CALCULATOR_TOOL], messages };
  });
}

/** The transcript of a perfect solution (two chained calls): what the vocabulary must cover. */
export function chainedSolution(p: Problem): Demo {
  return demonstrations([p], 1, 0)[0]!;
}
