import { InvalidArgumentError } from "../errors.js";
import { FunctionalLitAgent, LitAgent } from "./lit-agent.js";
import type { AgentLike, LitAgentLike, RolloutContext, RolloutFunction, RolloutResult } from "./types.js";

interface MethodContext {
  kind: "method";
  name: string | symbol;
  static: boolean;
  addInitializer(initializer: (this: unknown) => void): void;
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
export function rollout<T = any>(fn: RolloutFunction<T>, options?: { name?: string }): FunctionalLitAgent<T>;
export function rollout<M extends (task: any, context: RolloutContext) => any>(
  method: M,
  context: MethodContext,
): M;
export function rollout(fn: unknown, second?: unknown): unknown {
  const ctx = second as Partial<MethodContext> | undefined;
  if (ctx && ctx.kind === "method" && typeof ctx.addInitializer === "function") {
    if (ctx.static) throw new TypeError("@rollout must decorate an instance method");
    const name = ctx.name!;
    ctx.addInitializer(function (this: unknown) {
      Object.defineProperty(this, DECORATED, { value: name, configurable: true });
    });
    return fn;
  }
  return new FunctionalLitAgent(fn as RolloutFunction, (second as { name?: string } | undefined) ?? {});
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
