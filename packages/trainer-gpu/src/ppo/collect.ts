import { finalReward } from "@agl/adapter";
import {
  AbortedError,
  type Adapter,
  type LightningStore,
  type Rollout,
  type RolloutMode,
  type Span,
  type Triplet,
} from "@agl/core";
import type { RolloutTriplets } from "./triplet-rows.js";

/**
 * Enqueue a set of rollouts, wait for all of them, and turn each finished one into triplets — the
 * AgentModeDaemon part of Agent Lightning's VERL integration.
 */

export interface Sample<T> {
  /** Position of the task in its dataset. */
  index: number;
  task: T;
}

export interface CollectOptions<T> {
  store: LightningStore;
  adapter: Pick<Adapter<Span[], Triplet[]>, "adapt">;
  samples: readonly Sample<T>[];
  /** Rollouts per sample; they share the sample's data_id. */
  n: number;
  mode: RolloutMode;
  resourcesId: string;
  timeoutSeconds: number;
  pollSeconds: number;
  /** Seed for each rollout's sampling, passed in rollout metadata (agents may forward it as `seed`). */
  seedOf: (sampleIndex: number, repeat: number) => number;
  /** data_id of a sample in this batch. */
  dataIdOf: (sampleIndex: number) => string;
  signal: AbortSignal;
  /**
   * Runs once every rollout has ended and before spans are read: the proxy writes a call's span just
   * after the agent has its answer, so an agent can finish before its last span is in the store.
   */
  beforeAdapt?: () => Promise<void>;
  /** Called whenever rollouts have ended, with how many of the total have. */
  onProgress?: (ended: number, total: number) => void;
}

export interface CollectedRollout extends RolloutTriplets {
  sampleIndex: number;
  repeat: number;
  status: Rollout["status"];
  /** The rollout's final reward (the last reward span), null when it emitted none. */
  reward: number | null;
}

export class CollectAbortedError extends Error {
  constructor() {
    super("rollout collection aborted");
    this.name = "CollectAbortedError";
  }
}

/** The `n` rollout requests of one sample (one GRPO group), as `collectRollouts` enqueues them. */
export function groupRequests<T>(
  o: Pick<CollectOptions<T>, "n" | "mode" | "resourcesId" | "timeoutSeconds" | "seedOf" | "dataIdOf">,
  s: Sample<T>,
) {
  return Array.from({ length: o.n }, (_, repeat) => ({
    input: s.task,
    mode: o.mode,
    resources_id: o.resourcesId,
    config: { timeout_seconds: o.timeoutSeconds, unresponsive_seconds: o.timeoutSeconds },
    metadata: {
      data_id: o.dataIdOf(s.index),
      is_train: o.mode === "train",
      sample_index: s.index,
      repeat_index: repeat,
      seed: o.seedOf(s.index, repeat),
    },
  }));
}

/** A finished rollout with its triplets (adapted from its latest attempt's spans) and final reward. */
export async function adaptRollout(
  store: LightningStore,
  adapter: CollectOptions<unknown>["adapter"],
  r: Rollout,
): Promise<CollectedRollout> {
  const meta = (r.metadata ?? {}) as Record<string, unknown>;
  const spans = (await store.querySpans(r.rollout_id, { attemptId: "latest" })).items;
  let triplets: Triplet[] = [];
  if (spans.length > 0) triplets = adapter.adapt(spans);
  return {
    rolloutId: r.rollout_id,
    uid: String(meta.data_id),
    sampleIndex: Number(meta.sample_index),
    repeat: Number(meta.repeat_index),
    status: r.status,
    reward: finalReward(spans),
    triplets,
  };
}

/** Run the rollouts and return them ordered by (sample, repeat), whatever order they finished in. */
export async function collectRollouts<T>(o: CollectOptions<T>): Promise<CollectedRollout[]> {
  const requests = o.samples.flatMap((s) => groupRequests(o, s));
  const enqueued = await o.store.enqueueManyRollouts(requests);
  const pending = new Set(enqueued.map((r) => r.rollout_id));
  const finished = new Map<string, Rollout>();
  try {
    while (pending.size > 0) {
      const done = await waitForSome(o.store, pending, o.pollSeconds, o.signal);
      for (const r of done) {
        pending.delete(r.rollout_id);
        finished.set(r.rollout_id, r);
      }
      if (done.length > 0) o.onProgress?.(finished.size, enqueued.length);
    }
  } catch (error) {
    await cancelRollouts(o.store, pending);
    throw error;
  }
  await o.beforeAdapt?.();
  const out: CollectedRollout[] = [];
  for (const rollout of enqueued)
    out.push(await adaptRollout(o.store, o.adapter, finished.get(rollout.rollout_id)!));
  return out;
}

/** Wait up to `pollSeconds` for some of `pending` to end; an abort raises CollectAbortedError at once. */
export function waitForSome(
  store: LightningStore,
  pending: ReadonlySet<string>,
  pollSeconds: number,
  signal: AbortSignal,
): Promise<Rollout[]> {
  // The store's own cancellation: an abort releases the wait at once instead of leaving it to
  // run out its poll interval in the background.
  return store
    .waitForRollouts([...pending], { timeoutSeconds: pollSeconds, signal })
    .catch((error: unknown) => {
      throw AbortedError.isInstance(error) ? new CollectAbortedError() : error;
    });
}

/** Leave nothing queued behind: an aborted step's rollouts must not run later on new weights. */
export async function cancelRollouts(store: LightningStore, ids: Iterable<string>): Promise<void> {
  await Promise.allSettled([...ids].map((id) => store.updateRollout(id, { status: "cancelled" })));
}
