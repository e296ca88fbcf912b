import { InvalidArgumentError } from "../errors.js";
import { FunctionalLitAgent, LitAgent } from "./lit-agent.js";
import type { AgentLike, LitAgentLike, RolloutContext, RolloutFunction, RolloutResult } from "./types.js";

/** The options of the function-wrapper form. */
export interface RolloutOptions {
  /** Agent name used in logs; defaults to the function's name. */
  name?: string;
}

// Instance property naming its @rollout method, set by the decorator's initializer at construction. A
// registered symbol, so an agent compiled against another copy of @agl/core is still recognised.
const DECORATED = Symbol.for("agl.rollout.method");

/**
 * Turn a function into an agent, or (as a TC39 decorator) mark a class method as the agent's rollout.
 *
 * ```ts
 * const agent = rollout(async (task, { llm }) => { ...; return reward; });
 *
 * class MyAgent {
 *   @rollout
 *   async run(task: Task, { llm }: RolloutContext) { ...; return reward; }
 * }
 * ```
 */
// The decorator overload comes first: a decorator context has a string `name`, so it would also match the
// wrapper's `options` and the decorator would be typed as returning an agent instead of the method (TS1270).
export function rollout<This, M extends (this: This, task: any, context: RolloutContext) => any>(
  method: M,
  context: ClassMethodDecoratorContext<This, M>,
): M;
export function rollout<T = any>(fn: RolloutFunction<T>, options?: RolloutOptions): FunctionalLitAgent<T>;
// Last, so TypeScript's "the last overload gave the following error" under experimentalDecorators is this
// sentence rather than a page of unrelated mismatches.
export function rollout(
  target: object,
  propertyKey: string | symbol,
  descriptor: "@rollout is a standard (TC39) decorator: turn off experimentalDecorators for this file, or use rollout(fn)",
): never;
export function rollout(fn: unknown, second?: unknown, third?: unknown): unknown {
  if (isLegacyDecoratorCall(fn, second, third)) {
    throw new InvalidArgumentError(
      String(second),
      `@rollout on ${String(second)} was compiled as a legacy decorator (tsconfig "experimentalDecorators": true, as in NestJS/TypeORM projects); @rollout is a standard decorator. Either set "experimentalDecorators": false for the agent's file/project, or skip the decorator: pass \`rollout((task, ctx) => agent.${String(second)}(task, ctx))\` or an object with a rollout(task, ctx) method`,
    );
  }
  if (typeof fn !== "function") {
    throw new InvalidArgumentError("fn", `rollout() needs a function, got ${describeValue(fn)}`);
  }
  if (isMethodDecoratorContext(second)) {
    if (second.static) {
      throw new InvalidArgumentError(String(second.name), "@rollout must decorate an instance method");
    }
    const name = second.name;
    second.addInitializer(function (this: unknown) {
      Object.defineProperty(this, DECORATED, { value: name, configurable: true });
    });
    return fn;
  }
  if (second !== undefined && (typeof second !== "object" || second === null || Array.isArray(second))) {
    throw new InvalidArgumentError("options", `must be an object, got ${describeValue(second)}`);
  }
  const options = (second ?? {}) as RolloutOptions;
  if (options.name !== undefined && (typeof options.name !== "string" || options.name === "")) {
    throw new InvalidArgumentError("options.name", "must be a non-empty string");
  }
  return new FunctionalLitAgent(fn as RolloutFunction, options);
}

/** (prototype, key, descriptor): how TypeScript's experimentalDecorators calls a method decorator. */
function isLegacyDecoratorCall(target: unknown, key: unknown, descriptor: unknown): boolean {
  return (
    (typeof target === "object" || typeof target === "function") &&
    target !== null &&
    (typeof key === "string" || typeof key === "symbol") &&
    typeof descriptor === "object" &&
    descriptor !== null &&
    "value" in descriptor
  );
}

function isMethodDecoratorContext(value: unknown): value is ClassMethodDecoratorContext {
  const ctx = value as Partial<ClassMethodDecoratorContext> | undefined;
  return (
    typeof ctx === "object" &&
    ctx !== null &&
    ctx.kind === "method" &&
    typeof ctx.addInitializer === "function"
  );
}

function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

/** Normalise anything accepted as an agent; an error names what is wrong. */
export function toLitAgent<T = any>(agent: AgentLike<T>): LitAgentLike<T> & { agentName: string } {
  if (typeof agent === "function") return new FunctionalLitAgent(agent as RolloutFunction<T>);
  if (typeof agent === "object" && agent !== null) {
    const method = (agent as Record<symbol, string | symbol | undefined>)[DECORATED];
    if (method !== undefined) {
      const call = (task: T, context: RolloutContext): RolloutResult | Promise<RolloutResult> =>
        (agent as any)[method](task, context);
      return {
        agentName: agent.constructor?.name ?? String(method),
        trainingRollout: call,
        validationRollout: call,
      };
    }
    if (LitAgent.isInstance(agent)) return agent as LitAgent<T>;
    const a = agent as Partial<LitAgentLike<T>>;
    if (typeof a.trainingRollout === "function" && typeof a.validationRollout === "function") {
      return {
        agentName: agent.constructor?.name ?? "agent",
        trainingRollout: a.trainingRollout.bind(agent),
        validationRollout: a.validationRollout.bind(agent),
      };
    }
  }
  throw new InvalidArgumentError(
    "agent",
    "must be a rollout function, a rollout(fn) agent, a LitAgent, or an object with a @rollout method",
  );
}
