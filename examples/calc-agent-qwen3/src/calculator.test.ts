import { describe, expect, it } from "vitest";
import { CalculatorError, calculate } from "./calculator.js";

describe("calculator tool", () => {
  it("does one operation on two whole numbers", () => {
    expect(calculate("37+48")).toBe(85);
    expect(calculate(" 336 - 95 ")).toBe(241);
    expect(calculate("7*48")).toBe(336);
    expect(calculate("17-40")).toBe(-23);
  });

  it("rejects two operations, garbage and code with a typed error instead of evaluating it", () => {
    for (const bad of ["", "2+", "abc", "7*48-95", "(1+2)", "1/2", "-5*2", "process.exit()", "1.5+2"]) {
      expect(() => calculate(bad), bad).toThrow(CalculatorError);
    }
  });
});
