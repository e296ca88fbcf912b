import { DEFAULT_SCOPED_TOKEN_TTL_SECONDS, ScopedTokenSigner } from "../auth/scoped-token.js";
import { IllegalTransitionError, InvalidArgumentError, NotFoundError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { LightningStore } from "../store/store.js";
import { DEFAULT_SPAN_RETRY_DELAYS_MS } from "../tracing/rollout-trace.js";
import type { NamedResources } from "../types/resources.js";
import type { AttemptedRollout } from "../types/rollout.js";
import type { AttemptOutcome } from "./runner-options.js";

/**
 * Extra validity of a scoped token beyond the rollout's timeout: the proxy may run on another machine
 * whose clock differs, and the watchdog only times the attempt out at its next tick.
 */
export const TOKEN_TTL_MARGIN_SECONDS = 60;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Mints the per-attempt api keys of ProxyLLM resources; absent when the runner has no token secret. */
export function attemptTokenMinter(
  secret: string | undefined,
): ((attempted: AttemptedRollout) => string) | undefined {
  if (secret === undefined) return undefined;
  const signer = new ScopedTokenSigner(secret);
  return (attempted) => {
    const timeout = attempted.config.timeout_seconds;
    return signer.mint(attempted.rollout_id, attempted.attempt.attempt_id, {
      // Without a rollout timeout: the default lifetime. Either way the proxy stops honouring the token
      // once the attempt has finished.
      ttlSeconds:
        timeout == null ? DEFAULT_SCOPED_TOKEN_TTL_SECONDS : Math.ceil(timeout) + TOKEN_TTL_MARGIN_SECONDS,
    });
  };
}

/** The resources version an attempt runs with: its own `resources_id`, else the latest. */
export async function loadAttemptResources(
  store: LightningStore,
  attempted: AttemptedRollout,
): Promise<NamedResources> {
  if (attempted.resources_id) {
    const update = await store.getResourcesById(attempted.resources_id);
    if (!update) {
      throw new NotFoundError(
        "resources",
        attempted.resources_id,
        `Resources ${attempted.resources_id} of rollout ${attempted.rollout_id} not found in the store`,
      );
    }
    return update.resources;
  }
  const latest = await store.getLatestResources();
  if (!latest) {
    throw new NotFoundError(
      "resources",
      "latest",
      `No resources in the store for rollout ${attempted.rollout_id}: publish resources (e.g. Trainer initialResources or store.addResources) before running rollouts`,
    );
  }
  return latest.resources;
}

/**
 * Record the agent's outcome on the attempt. An attempt finished elsewhere meanwhile (e.g. timed out by
 * the watchdog) is reported as stale rather than failed: the store already decided its fate. Other
 * store errors (an outage) are retried after each of `retryDelaysMs`, so the outcome (and a failure's
 * reason) reaches the store once it is back.
 */
export async function finishAttempt(
  store: LightningStore,
  logger: Logger,
  attempted: AttemptedRollout,
  status: "succeeded" | "failed",
  error?: unknown,
  options: { retryDelaysMs?: readonly number[] | undefined } = {},
): Promise<AttemptOutcome> {
  const rid = attempted.rollout_id;
  const aid = attempted.attempt.attempt_id;
  if (status === "failed") {
    logger.warn(`rollout ${rid} attempt ${aid} failed: ${(error as Error)?.message ?? String(error)}`);
  }
  const update =
    status === "succeeded"
      ? { status }
      : { status, metadata: { ...(attempted.attempt.metadata ?? {}), error: describeError(error) } };
  const delays = options.retryDelaysMs ?? DEFAULT_SPAN_RETRY_DELAYS_MS;
  for (let round = 0; ; round++) {
    try {
      await store.updateAttempt(rid, aid, update);
      return status === "succeeded" ? { status } : { status, error };
    } catch (storeError) {
      if (IllegalTransitionError.isInstance(storeError) || NotFoundError.isInstance(storeError)) {
        logger.info(
          `attempt ${aid} of ${rid} was finished elsewhere; result not applied: ${(storeError as Error).message}`,
        );
        return { status: "stale", reason: (storeError as Error).message };
      }
      const delay = delays[round];
      if (delay === undefined || InvalidArgumentError.isInstance(storeError)) {
        logger.error(`could not mark attempt ${aid} of ${rid} ${status}`, storeError);
        return { status: "failed", error: storeError };
      }
      logger.warn(`marking attempt ${aid} of ${rid} ${status} failed; retrying in ${delay} ms`, storeError);
      await sleep(delay);
    }
  }
}

/** Mark an attempt the runner gave up on (stopped before it finished) failed, so the store can retry it. */
export async function markAbandoned(
  store: LightningStore,
  logger: Logger,
  attempted: AttemptedRollout,
  workerId: string,
): Promise<void> {
  const { rollout_id: rid, attempt } = attempted;
  try {
    await store.updateAttempt(rid, attempt.attempt_id, {
      status: "failed",
      metadata: {
        ...(attempt.metadata ?? {}),
        error: {
          type: "RunnerStopped",
          message: `runner ${workerId} stopped before the rollout finished`,
        },
      },
    });
  } catch (error) {
    logger.info(`could not mark abandoned attempt ${attempt.attempt_id} failed`, error);
  }
}

function describeError(error: unknown): Record<string, unknown> {
  if (error instanceof Error) {
    const field = (error as { field?: unknown }).field;
    return {
      type: error.name,
      message: error.message,
      stack: error.stack ?? null,
      ...(typeof field === "string" ? { field } : {}),
    };
  }
  return { type: typeof error, message: String(error), stack: null };
}
