/**
 * Type-check only (never imported, never bundled): `pnpm typecheck` compiles this file, so the TC39
 * decorator forms of `rollout` and `operation` must keep type-checking on class methods. The root
 * tsconfig excludes test/fixtures/**, hence the import: it pulls the esbuild-compiled fixture of
 * agent.test.ts into the type check too.
 */

import { DecoratedAgent } from "../../test/fixtures/decorated-agent.js";
import type { RolloutContext } from "../agent/types.js";
import { operation } from "../emitters/operation.js";
import { rollout } from "./rollout.js";

class TypedAgent {
  constructor(private readonly bonus: number) {}

  @rollout
  async run(task: { question: string }, context: RolloutContext): Promise<number> {
    return this.score(task.question) + (context.llm ? this.bonus : 0);
  }

  @operation
  score(text: string): number {
    return text.length;
  }
}

// Decorating keeps the method's own signature (the decorator overload returns the method type).
const typed: (task: { question: string }, context: RolloutContext) => Promise<number> = new TypedAgent(1).run;
const fixture: (task: string, context: RolloutContext) => Promise<number> = new DecoratedAgent().run;
export const decoratedMethods = [typed, fixture] as const;
