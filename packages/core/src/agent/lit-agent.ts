import { AglError, InvalidArgumentError } from "../errors.js";
import type { LitAgentLike, RolloutContext, RolloutFunction, RolloutResult } from "./types.js";

const LIT_AGENT = Symbol.for("agl.LitAgent");

/**
 * Base class for class-based agents. Override `rollout`, or `trainingRollout` and `validationRollout`
 * separately (both default to `rollout`). Rollouts in mode "train" use the training method; val, test
 * and no mode use the validation method.
 */
export class LitAgent<T = any> implements LitAgentLike<T> {
  /** Used in logs; defaults to the class name. */
  get agentName(): string {
    return this.constructor.name;
  }

  rollout(_task: T, _context: RolloutContext): RolloutResult | Promise<RolloutResult> {
    throw new AglError(
      `${this.agentName} must override rollout(), or both trainingRollout() and validationRollout()`,
    );
  }

  trainingRollout(task: T, context: RolloutContext): RolloutResult | Promise<RolloutResult> {
    return this.rollout(task, context);
  }

  validationRollout(task: T, context: RolloutContext): RolloutResult | Promise<RolloutResult> {
    return this.rollout(task, context);
  }

  static isInstance(value: unknown): value is LitAgentLike {
    return typeof value === "object" && value !== null && (value as any)[LIT_AGENT] === true;
  }
}

// On the prototype, so subclasses (and copies of this package) are recognised without instanceof.
Object.defineProperty(LitAgent.prototype, LIT_AGENT, { value: true });

/** A LitAgent around one function, what `rollout(fn)` returns. */
export class FunctionalLitAgent<T = any> extends LitAgent<T> {
  readonly fn: RolloutFunction<T>;
  private readonly name: string;

  constructor(fn: RolloutFunction<T>, options: { name?: string } = {}) {
    super();
    if (typeof fn !== "function") throw new InvalidArgumentError("fn", "rollout(fn) needs a function");
    this.fn = fn;
    this.name = options.name ?? (fn.name || "FunctionalLitAgent");
  }

  override get agentName(): string {
    return this.name;
  }

  override rollout(task: T, context: RolloutContext): RolloutResult | Promise<RolloutResult> {
    return this.fn(task, context);
  }
}
