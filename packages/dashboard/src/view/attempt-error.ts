import type { Attempt } from "@agl/core";

/** Why an attempt failed, as the runner recorded it in `metadata.error` (any shape a runner wrote). */
export interface AttemptError {
  type: string;
  message: string;
  /** The field an InvalidArgumentError named (e.g. `resources.main_llm.api_key_env`). */
  field: string | null;
  stack: string | null;
}

const text = (v: unknown): string | null => (typeof v === "string" && v.trim() !== "" ? v : null);

/**
 * The attempt's recorded error, or null when it has none. agl runners write `{ type, message, stack,
 * field? }` (a runner stopped before the agent returned writes `RunnerStopped`, with no spans at all);
 * Python Agent Lightning and other writers may leave a bare string or other keys, shown as they are.
 */
export function attemptError(attempt: Pick<Attempt, "metadata">): AttemptError | null {
  const raw = (attempt.metadata as Record<string, unknown> | null | undefined)?.error;
  if (raw === undefined || raw === null || raw === false) return null;
  if (typeof raw === "string") return { type: "Error", message: raw, field: null, stack: null };
  if (typeof raw !== "object") return { type: "Error", message: String(raw), field: null, stack: null };
  const e = raw as Record<string, unknown>;
  const message = text(e.message) ?? text(e.error) ?? text(e.detail) ?? JSON.stringify(raw);
  return {
    type: text(e.type) ?? text(e.name) ?? "Error",
    message,
    field: text(e.field),
    stack: text(e.stack) ?? text(e.traceback),
  };
}
