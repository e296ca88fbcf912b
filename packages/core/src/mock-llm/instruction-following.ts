/**
 * A mock "model" whose answers depend on the instructions in its prompt, so prompt optimisation has
 * something real to find. It answers arithmetic questions ("What is 12 + 3 * 4?") found in the last user
 * message, and it has three habits that cost reward unless the prompt (system and user messages) tells
 * it otherwise:
 *
 * | habit (default)                                     | instruction that fixes it (any of the phrases)                                      |
 * |-----------------------------------------------------|-------------------------------------------------------------------------------------|
 * | chatty reply: "Sure! ... The answer is 42."          | "only the number", "only the final answer", "just the number", "nothing else", "no explanation" |
 * | evaluates strictly left to right: 2 + 3 * 4 = 20    | "operator precedence", "order of operations", "multiplication before addition", "PEMDAS", "BODMAS" |
 * | thousands separators: 12,345                        | "no commas", "without commas", "no thousands separators", "without thousands separators", "digits only" |
 *
 * With no question in the prompt (say, the template lost its `{question}` placeholder) it says so.
 */
import type { MockReply, MockRequestInfo } from "./server.js";

export interface InstructionFollowerHabits {
  /** Follows operator precedence. */
  precedence: boolean;
  /** Replies with the number alone. */
  numberOnly: boolean;
  /** Writes numbers without thousands separators. */
  plainDigits: boolean;
}

const PHRASES: Record<keyof InstructionFollowerHabits, RegExp> = {
  numberOnly:
    /\bonly (?:the |a )?(?:final )?(?:number|answer|result)\b|\bjust the number\b|\bnothing else\b|\bno explanations?\b/i,
  precedence:
    /\boperator precedence\b|\border of operations\b|\bmultiplication (?:and division )?before addition\b|\bPEMDAS\b|\bBODMAS\b/i,
  plainDigits: /\bno commas\b|\bwithout commas\b|\b(?:no|without) thousands separators?\b|\bdigits only\b/i,
};

/** Which habits the prompt's instructions switch off. */
export function habitsFromPrompt(prompt: string): InstructionFollowerHabits {
  return {
    numberOnly: PHRASES.numberOnly.test(prompt),
    precedence: PHRASES.precedence.test(prompt),
    plainDigits: PHRASES.plainDigits.test(prompt),
  };
}

const QUESTION = /what is\s+(-?\d+(?:\s*[-+*]\s*-?\d+)*)\s*\?/gi;

/** Evaluate `+ - *` over integers, with or without precedence (without: strictly left to right). */
export function evaluateArithmetic(expression: string, precedence: boolean): number {
  const tokens = expression.match(/-?\d+|[-+*]/g) ?? [];
  // A "-" right after an operator (or first) belongs to the number; the regex reads "3 -4" as 3 and -4.
  const numbers: number[] = [];
  const ops: string[] = [];
  let expectNumber = true;
  for (const t of tokens) {
    if (expectNumber) {
      numbers.push(Number(t));
      expectNumber = false;
    } else if (/^-\d/.test(t)) {
      ops.push("-");
      numbers.push(Number(t.slice(1)));
    } else {
      ops.push(t);
      expectNumber = true;
    }
  }
  if (numbers.length === 0) return Number.NaN;
  if (!precedence) {
    let acc = numbers[0]!;
    ops.forEach((op, i) => {
      const n = numbers[i + 1]!;
      acc = op === "+" ? acc + n : op === "-" ? acc - n : acc * n;
    });
    return acc;
  }
  const terms: number[] = [numbers[0]!];
  const signs: string[] = [];
  ops.forEach((op, i) => {
    const n = numbers[i + 1]!;
    if (op === "*") terms[terms.length - 1] = terms.at(-1)! * n;
    else {
      signs.push(op);
      terms.push(n);
    }
  });
  return terms.slice(1).reduce((acc, n, i) => (signs[i] === "+" ? acc + n : acc - n), terms[0]!);
}

/** The whole prompt as one text: every system and user message, in order. */
export function promptText(body: any): string {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  return messages
    .filter((m) => m?.role === "system" || m?.role === "user" || m?.role === "developer")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")))
    .join("\n");
}

/** The reply the mock model gives to a prompt. */
export function instructionFollowingAnswer(prompt: string): string {
  // The last question asked: instructions may quote examples before it.
  const question = [...prompt.matchAll(QUESTION)].at(-1);
  if (!question) return "I'm not sure what you are asking. Could you give me the question?";
  const habits = habitsFromPrompt(prompt);
  const value = evaluateArithmetic(question[1]!, habits.precedence);
  const number = habits.plainDigits ? String(value) : value.toLocaleString("en-US");
  return habits.numberOnly ? number : `Sure! Let me work that out. The answer is ${number}.`;
}

/**
 * A `respond` function for `startMockLLMServer`: the instruction-following arithmetic model above, for
 * chat requests; other requests get a plain echo of their prompt's end.
 */
export function instructionFollowingResponder(): (request: MockRequestInfo) => MockReply {
  return (request) => {
    if (!Array.isArray(request.body?.messages)) {
      return { content: ` echo ${String(request.body?.prompt ?? "").slice(-20)}` };
    }
    return { content: instructionFollowingAnswer(promptText(request.body)) };
  };
}
