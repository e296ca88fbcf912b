/**
 * The agent's calculator tool: integer arithmetic with + - * / and parentheses, evaluated by a small
 * recursive-descent parser (never `eval`: the expression comes from a model).
 */

export class CalculatorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CalculatorError";
  }
}

export function calculate(expression: string): number {
  const src = expression.replace(/\s+/g, "");
  if (src.length === 0 || src.length > 64) throw new CalculatorError("expression must be 1-64 characters");
  let pos = 0;
  const peek = () => src[pos];
  const expr = (): number => {
    let v = term();
    while (peek() === "+" || peek() === "-") v = src[pos++] === "+" ? v + term() : v - term();
    return v;
  };
  const term = (): number => {
    let v = factor();
    while (peek() === "*" || peek() === "/") {
      const op = src[pos++];
      const r = factor();
      if (op === "/" && r === 0) throw new CalculatorError("division by zero");
      v = op === "*" ? v * r : v / r;
    }
    return v;
  };
  const factor = (): number => {
    if (peek() === "-") {
      pos++;
      return -factor();
    }
    if (peek() === "(") {
      pos++;
      const v = expr();
      if (src[pos++] !== ")") throw new CalculatorError(`expected ")" at ${pos - 1}`);
      return v;
    }
    const m = /^\d+(\.\d+)?/.exec(src.slice(pos));
    if (!m) throw new CalculatorError(`unexpected ${peek() === undefined ? "end" : `"${peek()}"`} at ${pos}`);
    pos += m[0].length;
    return Number(m[0]);
  };
  const value = expr();
  if (pos !== src.length) throw new CalculatorError(`unexpected "${src[pos]}" at ${pos}`);
  return value;
}

/** How results are shown to the model: integers plainly, other values rounded to 4 decimals. */
export function formatResult(value: number): string {
  return Number.isInteger(value) ? String(value) : String(Number(value.toFixed(4)));
}
