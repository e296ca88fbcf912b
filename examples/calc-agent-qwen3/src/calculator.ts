/**
 * The agent's calculator tool: one operation (+, - or *) on two whole numbers, e.g. "72-17". A longer
 * expression is an error, so a two-step problem takes two calls with the first result copied into the
 * second. Parsed with a regular expression, never `eval` (the expression comes from a model).
 */

export class CalculatorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CalculatorError";
  }
}

const ONE_OPERATION = /^(\d{1,6})([-+*])(\d{1,6})$/;

export function calculate(expression: string): number {
  const m = ONE_OPERATION.exec(expression.replace(/\s+/g, ""));
  if (!m) throw new CalculatorError("expected one operation on two whole numbers, e.g. 72-17");
  const a = Number(m[1]);
  const b = Number(m[3]);
  return m[2] === "+" ? a + b : m[2] === "-" ? a - b : a * b;
}
