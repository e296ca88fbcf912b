/** Records the durable stores build the same way: new rollouts, and the attempts a batch of spans touches. */
import {
  type EnqueueRolloutRequestSchema,
  newRolloutId,
  type Rollout,
  RolloutConfigSchema,
  type Span,
} from "@agl/core";
import type { z } from "zod";

/** A new rollout record (the latest resources id when none is given). */
export function newRollout(
  req: z.output<typeof EnqueueRolloutRequestSchema>,
  status: Rollout["status"],
  now: number,
  latestResources: string | null,
): Rollout {
  return {
    rollout_id: newRolloutId(),
    input: req.input,
    start_time: now,
    end_time: null,
    mode: req.mode ?? null,
    resources_id: req.resources_id ?? latestResources,
    status,
    config: req.config ?? RolloutConfigSchema.parse({}),
    metadata: req.metadata ?? {},
  };
}

/** The attempts that got a span, by rollout (each records one activity however many spans it got). */
export function attemptsBySpanRollout(spans: Iterable<Span>): Map<string, Set<string>> {
  const active = new Map<string, Set<string>>();
  for (const s of spans) {
    let set = active.get(s.rollout_id);
    if (!set) active.set(s.rollout_id, (set = new Set()));
    set.add(s.attempt_id);
  }
  return active;
}
