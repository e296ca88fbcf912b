import { transform } from "esbuild";
import { describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../errors.js";
import { rollout } from "./rollout.js";

describe("@rollout under experimentalDecorators", () => {
  it("a legacy decorator call gets one clear message instead of 'needs a function, got object'", () => {
    class Agent {
      run() {
        return 1;
      }
    }
    const descriptor = Object.getOwnPropertyDescriptor(Agent.prototype, "run")!;
    let error: unknown;
    try {
      (rollout as (...args: unknown[]) => unknown)(Agent.prototype, "run", descriptor);
    } catch (e) {
      error = e;
    }
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/compiled as a legacy decorator .*experimentalDecorators/);
    expect((error as Error).message).not.toMatch(/needs a function/);
  });

  it("the same message from code compiled with experimentalDecorators (as a NestJS project would)", async () => {
    const { code } = await transform(
      `class Agent { @rollout async run(task, ctx) { return 1; } }\nexport { Agent };`,
      { loader: "ts", format: "esm", tsconfigRaw: { compilerOptions: { experimentalDecorators: true } } },
    );
    const module = new Function("rollout", `${code.replace(/export \{[^}]*\};?/, "")}; return Agent;`);
    expect(() => module(rollout)).toThrow(/legacy decorator/);
  });
});
