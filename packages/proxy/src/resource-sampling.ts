import type { LightningStore } from "@agl/core";
import type { ProxyLogger } from "./options.js";

/** The store methods used to find a rollout's LLM resource (optional on a SpanSink). */
export type ResourceLookup = Pick<
  LightningStore,
  "getRolloutById" | "getResourcesById" | "getLatestResources"
>;

/** The sampling parameters the proxy applies: the LLM resource's `sampling_parameters`. */
export interface ResourceSamplingParameters {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  max_tokens?: number;
}

const MAX_CACHED = 10_000;

/**
 * The sampling parameters of the LLM resource a rollout was given (`sampling_parameters` of its
 * `proxy_llm`, else its only `llm` resource), applied to the rollout's calls as defaults: a call's own
 * `temperature` / `top_p` / `top_k` win, and its `max_tokens` / `max_completion_tokens` may only be
 * tighter than the resource's `max_tokens`. So a trainer's limits hold for an agent that forwards none of
 * them, whatever engine is behind the proxy.
 *
 * Resources are immutable once published: a rollout's `resources_id` is read once (concurrent calls
 * share the read) and each resource set's parameters once. A rollout without `resources_id` follows the
 * latest resources (read per call). A store failure or an unknown rollout answers null (the call goes out
 * unchanged; the warning is logged once).
 */
export class ResourceSampling {
  /** A rollout's `resources_id` (null: it follows the latest resources); one store read per rollout. */
  private readonly rollouts = new Map<string, Promise<string | null>>();
  /** Published resources never change, so their parameters are cached by id. */
  private readonly byResources = new Map<string, Promise<ResourceSamplingParameters | null>>();
  private warned = false;

  constructor(
    private readonly store: ResourceLookup,
    private readonly log: ProxyLogger,
  ) {}

  /** A lookup over `store`, or null when the store cannot read rollouts and resources. */
  static for(store: object, log: ProxyLogger): ResourceSampling | null {
    const s = store as Partial<ResourceLookup>;
    return typeof s.getRolloutById === "function" &&
      typeof s.getResourcesById === "function" &&
      typeof s.getLatestResources === "function"
      ? new ResourceSampling(store as ResourceLookup, log)
      : null;
  }

  async parametersFor(rolloutId: string): Promise<ResourceSamplingParameters | null> {
    try {
      const resourcesId = await cached(this.rollouts, rolloutId, async () => {
        const rollout = await this.store.getRolloutById(rolloutId);
        if (!rollout) throw new Error(`rollout ${rolloutId} not found`);
        return rollout.resources_id;
      });
      if (resourcesId === null) {
        const latest = await this.store.getLatestResources();
        return latest ? pickParameters(latest.resources) : null;
      }
      return await cached(this.byResources, resourcesId, async () => {
        const update = await this.store.getResourcesById(resourcesId);
        if (!update) throw new Error(`resources ${resourcesId} not found`);
        return pickParameters(update.resources);
      });
    } catch (error) {
      if (!this.warned) {
        this.warned = true;
        this.log.warn(
          `cannot read the rollout's LLM resource to apply its sampling parameters: ${String(error)}`,
        );
      }
      return null;
    }
  }
}

/** `map`'s promise for `key`, created by `load` once; a failure is not cached (the next call retries). */
function cached<T>(map: Map<string, Promise<T>>, key: string, load: () => Promise<T>): Promise<T> {
  let hit = map.get(key);
  if (!hit) {
    hit = load();
    if (map.size >= MAX_CACHED) map.clear();
    map.set(key, hit);
    hit.catch(() => map.delete(key));
  }
  return hit;
}

function pickParameters(resources: Record<string, unknown>): ResourceSamplingParameters | null {
  const all = Object.values(resources) as Array<{ resource_type?: string; sampling_parameters?: unknown }>;
  const proxied = all.filter((r) => r?.resource_type === "proxy_llm");
  const plain = all.filter((r) => r?.resource_type === "llm");
  const chosen =
    proxied.length === 1 ? proxied[0] : proxied.length === 0 && plain.length === 1 ? plain[0] : null;
  const raw = chosen?.sampling_parameters;
  if (!raw || typeof raw !== "object") return null;
  const out: ResourceSamplingParameters = {};
  const p = raw as Record<string, unknown>;
  const num = (v: unknown) => typeof v === "number" && Number.isFinite(v);
  if (num(p.temperature)) out.temperature = p.temperature as number;
  if (num(p.top_p)) out.top_p = p.top_p as number;
  if (num(p.top_k)) out.top_k = p.top_k as number;
  if (num(p.max_tokens) && (p.max_tokens as number) >= 1) out.max_tokens = Math.floor(p.max_tokens as number);
  return out;
}

/**
 * Apply `params` to a chat or completions body: fill in the sampling fields the call left out, and clamp
 * its token limit to the resource's `max_tokens` (added as `max_tokens` when the call set none).
 */
export function applyResourceSampling(body: Record<string, any>, params: ResourceSamplingParameters): void {
  for (const key of ["temperature", "top_p", "top_k"] as const) {
    if (params[key] !== undefined && body[key] == null) body[key] = params[key];
  }
  const limit = params.max_tokens;
  if (limit === undefined) return;
  let set = false;
  for (const key of ["max_tokens", "max_completion_tokens"]) {
    if (typeof body[key] === "number") {
      body[key] = Math.min(body[key], limit);
      set = true;
    }
  }
  if (!set) body.max_tokens = limit;
}
