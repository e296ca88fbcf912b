/**
 * @agl/apo/mock-optimizer: a scripted critique and edit "model" for the instruction-following arithmetic
 * mock of `@agl/core/mock-llm`, so APO can run end to end with no hosted model (examples, tests, bench).
 *
 * The critic reads the runs in an APO critique request and names each habit of the mock model it sees
 * evidence of (a chatty reply, a left-to-right result, a thousands separator). The editor takes the
 * template between `<template>` tags and the critique of an APO edit request and adds the instruction
 * that fixes each habit named (only the first missing one when the request asks for ONE change).
 */
import {
  evaluateArithmetic,
  type InstructionFollowerHabits,
  instructionFollowingResponder,
  type MockReply,
  type MockRequestInfo,
} from "@agl/core/mock-llm";

type Habit = keyof InstructionFollowerHabits;

/** The instruction the editor adds for each habit (phrased so the mock model recognises it). */
export const FIXES: Record<Habit, string> = {
  numberOnly: "Reply with only the number, nothing else.",
  precedence: "Follow operator precedence: multiplication before addition and subtraction.",
  plainDigits: "Write the number without commas (no thousands separators).",
};

const CRITIQUES: Record<Habit, string> = {
  numberOnly:
    "- Replies wrap the result in chatty sentences ('Sure! ... The answer is ...'), so exact-match grading fails. Require only the number in the reply.",
  precedence:
    "- Expressions with several operators are evaluated left to right (2 + 3 * 4 gives 20). State that operator precedence applies.",
  plainDigits:
    "- Large results are written with thousands separators (1,234), which the grader rejects. Ask for digits without commas.",
};

const ORDER: Habit[] = ["numberOnly", "precedence", "plainDigits"];

/** The habits a critique request shows evidence of, in a fixed order. */
export function habitsSeen(requestText: string): Habit[] {
  const seen = new Set<Habit>();
  if (/\bthe answer is\b/i.test(requestText)) seen.add("numberOnly");
  if (/\b\d{1,3}(?:,\d{3})+\b/.test(requestText)) seen.add("plainDigits");
  for (const m of requestText.matchAll(/what is\s+(-?\d+(?:\s*[-+*]\s*-?\d+)+)\s*\?/gi)) {
    const after = requestText.slice(m.index! + m[0].length);
    const reply = /-?\d[\d,]*/.exec(after)?.[0].replaceAll(",", "");
    if (reply === undefined) continue;
    const leftToRight = evaluateArithmetic(m[1]!, false);
    if (Number(reply) === leftToRight && leftToRight !== evaluateArithmetic(m[1]!, true))
      seen.add("precedence");
  }
  return ORDER.filter((h) => seen.has(h));
}

/** The critic's reply to a critique request. */
export function mockCritique(requestText: string): string {
  const habits = habitsSeen(requestText);
  if (habits.length === 0) return "Critique:\n- No failure in these runs can be traced to the template.";
  return `Critique:\n${habits.map((h) => CRITIQUES[h]).join("\n")}`;
}

/** The editor's reply to an edit request: the revised template in `<prompt>` tags. */
export function mockEdit(requestText: string): string {
  const template = /<template>\n?([\s\S]*?)\n?<\/template>/.exec(requestText)?.[1];
  if (template === undefined) return "I could not find the template to edit.";
  const critique = requestText.slice(requestText.indexOf("</template>"));
  const wanted = ORDER.filter(
    (h) => critique.includes(CRITIQUES[h].slice(2, 40)) && !template.includes(FIXES[h]),
  );
  const apply = /\bONE point\b/.test(requestText) ? wanted.slice(0, 1) : wanted;
  if (apply.length === 0) return `<prompt>${template}</prompt>`;
  const lines = template.split("\n");
  // Instructions go before the first line with a placeholder (the task itself stays last).
  const at = lines.findIndex((l) => /\{[A-Za-z_]\w*\}/.test(l));
  const insert = apply.map((h) => FIXES[h]);
  lines.splice(at < 0 ? lines.length : at, 0, ...insert);
  return `<prompt>${lines.join("\n")}</prompt>`;
}

function requestText(request: MockRequestInfo): string {
  const messages: any[] = Array.isArray(request.body?.messages) ? request.body.messages : [];
  return messages.map((m) => (typeof m?.content === "string" ? m.content : "")).join("\n");
}

export interface MockOptimizerOptions {
  /** Model name the critic answers to (default "mock-critic"). */
  gradientModel?: string;
  /** Model name the editor answers to (default "mock-editor"). */
  editModel?: string;
}

/**
 * One `respond` function for `startMockLLMServer` serving the whole APO loop: the critic and the editor
 * by model name, every other model is the instruction-following arithmetic model (the agent's LLM).
 */
export function mockOptimizerResponder(
  options: MockOptimizerOptions = {},
): (request: MockRequestInfo) => MockReply {
  const gradientModel = options.gradientModel ?? "mock-critic";
  const editModel = options.editModel ?? "mock-editor";
  const agentModel = instructionFollowingResponder();
  return (request) => {
    const model = request.body?.model;
    if (model === gradientModel) return { content: mockCritique(requestText(request)) };
    if (model === editModel) return { content: mockEdit(requestText(request)) };
    return agentModel(request);
  };
}

/** An arithmetic task for the mock model, graded by exact match. */
export interface ArithmeticTask {
  question: string;
  answer: string;
}

/**
 * `count` tasks cycling through four kinds, so each instruction the mock model can be given is worth a
 * share of the reward: small single operations (need "only the number"), small mixed operations (also need
 * precedence), large single operations (also need no commas) and large mixed operations (need all three).
 * Deterministic; `offset` starts further along the sequence (disjoint train and validation sets).
 */
export function mockArithmeticTasks(count: number, offset = 0): ArithmeticTask[] {
  const tasks: ArithmeticTask[] = [];
  for (let k = offset; k < offset + count; k++) {
    const a = 2 + ((k * 7) % 9);
    const b = 3 + ((k * 5) % 7);
    const c = 2 + ((k * 3) % 8);
    const big = 1000 + ((k * 137) % 8000);
    let question: string;
    switch (k % 4) {
      case 0:
        question = `What is ${a} + ${b}?`;
        break;
      case 1:
        question = `What is ${a} + ${b} * ${c}?`;
        break;
      case 2:
        question = `What is ${big} + ${a * 100}?`;
        break;
      default:
        question = `What is ${big} + ${b * 100} * ${c}?`;
    }
    const expression = /what is (.*)\?/i.exec(question)![1]!;
    tasks.push({ question, answer: String(evaluateArithmetic(expression, true)) });
  }
  return tasks;
}
