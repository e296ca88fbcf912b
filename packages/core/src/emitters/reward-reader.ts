import { ATTR, SPAN_NAMES } from "../tracing/conventions.js";

/** The part of a span the readers look at, so stored Spans, SpanCoreFields and OTLP records all work. */
export interface RewardCarrier {
  name: string;
  attributes?: Record<string, unknown> | null;
}

export interface RewardDimension {
  name: string;
  value: number;
}

const toNumber = (v: unknown): number | null => {
  if (typeof v === "number" && Number.isFinite(v)) return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v))) return Number(v);
  return null;
};

/**
 * The dimensions under `agentlightning.reward.*`, whether flattened (`agentlightning.reward.0.value`)
 * or nested (OTLP ingest can produce `{"agentlightning.reward": [{name, value}]}`), in index order.
 */
export function getRewardDimensions(span: RewardCarrier): RewardDimension[] {
  const attrs = span.attributes ?? {};
  const byIndex = new Map<number, { name?: unknown; value?: unknown }>();
  const prefix = `${ATTR.rewardPrefix}.`;
  for (const [key, value] of Object.entries(attrs)) {
    if (!key.startsWith(prefix)) continue;
    const [index, field, ...rest] = key.slice(prefix.length).split(".");
    if (rest.length > 0 || !/^\d+$/.test(index ?? "") || (field !== "name" && field !== "value")) continue;
    const slot = byIndex.get(Number(index)) ?? {};
    slot[field] = value;
    byIndex.set(Number(index), slot);
  }
  const nested = attrs[ATTR.rewardPrefix];
  if (nested && typeof nested === "object") {
    for (const [index, item] of Object.entries(nested as Record<string, unknown>)) {
      if (!/^\d+$/.test(index) || typeof item !== "object" || item === null || byIndex.has(Number(index)))
        continue;
      byIndex.set(Number(index), item as { name?: unknown; value?: unknown });
    }
  }
  const out: RewardDimension[] = [];
  for (const index of [...byIndex.keys()].sort((a, b) => a - b)) {
    const slot = byIndex.get(index)!;
    const value = toNumber(slot.value);
    if (value === null) continue;
    out.push({ name: typeof slot.name === "string" ? slot.name : String(index), value });
  }
  return out;
}

/** `{"type": "reward", "value": v}` from AgentOps' deprecated `@reward`, as an object or JSON text. */
function agentOpsReward(value: unknown): number | null {
  let v = value;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      return null;
    }
  }
  if (typeof v !== "object" || v === null) return null;
  const rec = v as Record<string, unknown>;
  return rec.type === "reward" ? toNumber(rec.value) : null;
}

/**
 * The reward a span carries, or null. First match wins (Agent Lightning v0.3 §4):
 * 1. `agentlightning.reward.*` (primary dimension, index 0);
 * 2. `agentops.task.output` / `agentops.entity.output` = `{type: "reward", value}`;
 * 3. an `agentlightning.annotation` span with a `reward` attribute;
 * 4. v0.2's `agentlightning.reward` span with a `reward` attribute.
 */
export function getRewardValue(span: RewardCarrier): number | null {
  const dims = getRewardDimensions(span);
  if (dims.length > 0) return dims[0]!.value;
  const attrs = span.attributes ?? {};
  for (const key of ["agentops.task.output", "agentops.entity.output"]) {
    if (key in attrs) {
      const v = agentOpsReward(attrs[key]);
      if (v !== null) return v;
    }
  }
  if (span.name === SPAN_NAMES.annotation || span.name === SPAN_NAMES.rewardV02) {
    const v = toNumber(attrs.reward);
    if (v !== null) return v;
  }
  return null;
}

export function isRewardSpan(span: RewardCarrier): boolean {
  return getRewardValue(span) !== null;
}

/** The spans that carry a reward, in the given order. */
export function findRewardSpans<S extends RewardCarrier>(spans: readonly S[]): S[] {
  return spans.filter(isRewardSpan);
}

/** The last reward in list order (pass spans sorted by sequence id), or null when none carries one. */
export function findFinalReward(spans: readonly RewardCarrier[]): number | null {
  for (let i = spans.length - 1; i >= 0; i--) {
    const v = getRewardValue(spans[i]!);
    if (v !== null) return v;
  }
  return null;
}
