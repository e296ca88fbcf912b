import { InvalidArgumentError } from "../errors.js";
import { rewardNameKey, rewardValueKey, SPAN_NAMES } from "../tracing/conventions.js";
import { flattenAttributes } from "../tracing/flatten.js";
import type { Attributes, SpanCoreFields } from "../types/span.js";
import { type EmitOptions, recordSpan } from "./record.js";

export interface EmitRewardOptions extends EmitOptions {
  /** For a multi-dimensional reward: the dimension that is "the" reward (stored first, index 0). Required then. */
  primaryKey?: string;
  /** Extra annotation attributes (flattened; leaves must be primitives). */
  attributes?: Record<string, unknown>;
  /**
   * Multi-policy training: the policy (role) this reward is for, recorded as `agl.reward.policy`; it then
   * rewards only that policy's calls. Without it a reward applies to every policy (the final reward).
   */
  policy?: string;
}

/** Span attribute naming the policy a reward is for (see `EmitRewardOptions.policy`). */
export const REWARD_POLICY_KEY = "agl.reward.policy";

/**
 * The reward attributes of Agent Lightning v0.3: `agentlightning.reward.<i>.name` / `.value`, the
 * primary dimension at index 0 (named "primary" for a scalar reward), then the others in key order.
 */
export function rewardAttributes(reward: number | Record<string, number>, primaryKey?: string): Attributes {
  const dims: Array<[string, number]> = [];
  if (typeof reward === "number") {
    dims.push([primaryKey ?? "primary", checkNumber(reward, "reward")]);
  } else if (typeof reward === "object" && reward !== null && !Array.isArray(reward)) {
    if (primaryKey === undefined) {
      throw new InvalidArgumentError("primaryKey", "is required for a multi-dimensional reward");
    }
    if (!(primaryKey in reward)) {
      throw new InvalidArgumentError(
        "primaryKey",
        `"${primaryKey}" is not one of the reward keys (${Object.keys(reward).join(", ")})`,
      );
    }
    dims.push([primaryKey, checkNumber(reward[primaryKey], `reward.${primaryKey}`)]);
    for (const [k, v] of Object.entries(reward)) {
      if (k !== primaryKey) dims.push([k, checkNumber(v, `reward.${k}`)]);
    }
  } else {
    throw new InvalidArgumentError("reward", "must be a number or an object of numbers");
  }
  const out: Attributes = {};
  dims.forEach(([name, value], i) => {
    out[rewardNameKey(i)] = name;
    out[rewardValueKey(i)] = value;
  });
  return out;
}

/** Emit an `agentlightning.annotation` reward span (scalar, or `{k: v}` with a primary key). */
export function emitReward(
  reward: number | Record<string, number>,
  options: EmitRewardOptions = {},
): SpanCoreFields {
  if (options.policy !== undefined && (typeof options.policy !== "string" || options.policy.length === 0))
    throw new InvalidArgumentError("policy", "must be a non-empty policy name");
  const attributes = {
    ...flattenAttributes(options.attributes ?? {}, "", "reject"),
    ...rewardAttributes(reward, options.primaryKey),
    ...(options.policy !== undefined ? { [REWARD_POLICY_KEY]: options.policy } : {}),
  };
  return recordSpan(SPAN_NAMES.annotation, attributes, options);
}

function checkNumber(value: unknown, field: string): number {
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new InvalidArgumentError(field, `must be a finite number (got ${String(value)})`);
  }
  return value;
}
