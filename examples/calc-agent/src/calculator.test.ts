import { describe, expect, it } from "vitest";
import { CalculatorError, calculate, formatResult } from "./calculator.js";

describe("calculator tool", () => {
  it("evaluates with precedence, parentheses and unary minus", () => {
    expect(calculate("37+48")).toBe(85);
    expect(calculate("2+3*4")).toBe(14);
    expect(calculate("(2+3)*4")).toBe(20);
    expect(calculate(" 90 - 7 - 3 ")).toBe(80);
    expect(calculate("-5*2")).toBe(-10);
    expect(formatResult(calculate("7/2"))).toBe("3.5");
  });

  it("rejects garbage with a typed error instead of evaluating it", () => {
    for (const bad of ["", "2+", "abc", "1/0", "(1+2", "process.exit()", "1+2)"]) {
      expect(() => calculate(bad), bad).toThrow(CalculatorError);
    }
  });
});
