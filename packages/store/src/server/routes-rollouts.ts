import {
  EnqueueBatchSchema,
  IdStringSchema,
  type LightningStore,
  MAX_DEQUEUE_LIMIT,
  MAX_IDS_PER_CALL,
  type Rollout,
  RolloutPatchSchema,
  StorableStringSchema,
} from "@agl/core";
import type { Context, Hono } from "hono";
import { z } from "zod";
import { badRequest, parseRequest } from "./errors.js";
import { asObject, startRollout, updateAttempt } from "./hot-handlers.js";
import { attemptQuery, ROLLOUT_LIST_KEYS, readJsonBody, readQueryParams, rolloutQuery } from "./params.js";

export interface WaitLimits {
  /** Longest a single POST /waits/rollouts holds the request, in seconds. */
  maxWaitSeconds: number;
  /** Aborted when the server shuts down, so long waits answer early instead of holding the close. */
  shutdownSignal: AbortSignal;
}

const EnqueueBody = z.object({ rollouts: EnqueueBatchSchema });
const DequeueBody = z.object({
  // Clamped, not refused: the Python client swallows a 422 here and its runner would idle forever.
  limit: z
    .number()
    .int()
    .default(1)
    .transform((n) => Math.min(n, MAX_DEQUEUE_LIMIT)),
  worker_id: IdStringSchema.nullable().optional(),
});
const StartAttemptBody = z.object({ worker_id: IdStringSchema.nullable().optional() });
const WaitBody = z.object({
  rollout_ids: z.array(StorableStringSchema).max(MAX_IDS_PER_CALL),
  timeout: z.number().nullable().optional(),
});

/** Queue, rollout, attempt and wait routes of the v0.3 REST API (mounted under /v1/agl). */
export function registerRolloutRoutes(app: Hono, store: LightningStore, limits: WaitLimits): void {
  app.post("/queues/rollouts/enqueue", async (c) => {
    const body = parseRequest(EnqueueBody, await readJsonBody(c, undefined));
    const rollouts = await store.enqueueManyRollouts(body.rollouts);
    return c.json(rollouts, 201);
  });

  app.post("/queues/rollouts/dequeue", async (c) => {
    const body = parseRequest(DequeueBody, await readJsonBody(c, {}));
    if (body.limit <= 0) return c.json([]);
    const claimed = await store.dequeueManyRollouts({ limit: body.limit, workerId: body.worker_id ?? null });
    return c.json(claimed);
  });

  app.post("/rollouts", async (c) => {
    return c.json(await startRollout(store, await readJsonBody(c, undefined)), 201);
  });

  const searchRollouts = async (c: Context) =>
    c.json(await store.queryRollouts(rolloutQuery(await readQueryParams(c, ROLLOUT_LIST_KEYS))));
  app.get("/rollouts", searchRollouts);
  app.post("/rollouts/search", searchRollouts);

  app.get("/rollouts/:rid", async (c) => c.json(await store.getRolloutById(c.req.param("rid"))));

  app.post("/rollouts/:rid", async (c) => {
    const body = asObject(await readJsonBody(c, {}), "");
    for (const key of ["status", "config"] as const) {
      if (key in body && body[key] === null) throw badRequest(key, "cannot be null");
    }
    const patch = parseRequest(RolloutPatchSchema, body);
    return c.json(await store.updateRollout(c.req.param("rid"), patch));
  });

  app.post("/rollouts/:rid/attempts", async (c) => {
    const body = parseRequest(StartAttemptBody, await readJsonBody(c, {}));
    return c.json(await store.startAttempt(c.req.param("rid"), { workerId: body.worker_id ?? null }), 201);
  });

  const searchAttempts = async (c: Context) =>
    c.json(
      await store.queryAttempts(c.req.param("rid") as string, attemptQuery(await readQueryParams(c, []))),
    );
  app.get("/rollouts/:rid/attempts", searchAttempts);
  app.post("/rollouts/:rid/attempts/search", searchAttempts);

  app.get("/rollouts/:rid/attempts/latest", async (c) =>
    c.json(await store.getLatestAttempt(c.req.param("rid"))),
  );

  app.post("/rollouts/:rid/attempts/:aid", async (c) =>
    c.json(await updateAttempt(store, c.req.param("rid"), c.req.param("aid"), await readJsonBody(c, {}))),
  );

  app.post("/waits/rollouts", async (c) => {
    const body = parseRequest(WaitBody, await readJsonBody(c, undefined));
    const { rollouts, complete } = await boundedWait(
      store,
      body.rollout_ids,
      body.timeout ?? null,
      limits,
      // Lazily: on node-server, c.req.raw builds a whole web Request, and a timeout-0 poll needs none.
      () => c.req.raw.signal,
    );
    // Tells agl clients every known id finished (not the timeout, the server's cap or a shutdown
    // ended the wait), so they stop polling even when some ids are unknown and will never finish.
    if (complete) c.header("x-agl-wait-complete", "1");
    return c.json(rollouts);
  });
}

/**
 * Wait server-side, but never longer than the server's cap; clients that want longer waits call
 * again. A shutdown or a client disconnect ends the wait early with whatever is finished.
 */
async function boundedWait(
  store: LightningStore,
  ids: string[],
  timeout: number | null,
  limits: WaitLimits,
  requestSignal: () => AbortSignal,
): Promise<{ rollouts: Rollout[]; complete: boolean }> {
  if (ids.length === 0) return { rollouts: [], complete: true };
  if (timeout !== null && timeout <= 0) {
    return { rollouts: await store.waitForRollouts(ids, { timeoutSeconds: 0 }), complete: true };
  }
  const requested = timeout ?? Number.POSITIVE_INFINITY;
  const seconds = Math.min(requested, limits.maxWaitSeconds);
  const signals = [limits.shutdownSignal, requestSignal()];
  if (signals.some((s) => s.aborted)) {
    return { rollouts: await store.waitForRollouts(ids, { timeoutSeconds: 0 }), complete: false };
  }
  // The store wait gets the abort too, so a disconnected client's waiter is released at once rather
  // than at its timeout; the race still ends the request for a store that ignores the signal.
  const controller = new AbortController();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<"aborted">((resolve) => {
    onAbort = () => {
      // Settle the race first, so it never sees the store's AbortedError that abort() triggers.
      resolve("aborted");
      controller.abort();
    };
    for (const s of signals) s.addEventListener("abort", onAbort, { once: true });
  });
  const started = performance.now();
  try {
    const waiting = store.waitForRollouts(ids, { timeoutSeconds: seconds, signal: controller.signal });
    // Its AbortedError is expected once the race is lost; nobody else awaits it.
    waiting.catch(() => {});
    const result = await Promise.race([waiting, aborted]);
    if (result === "aborted") {
      return { rollouts: await store.waitForRollouts(ids, { timeoutSeconds: 0 }), complete: false };
    }
    // Complete = every known id is terminal: the store's wait returned before its timeout (it skips
    // unknown ids) or every id is in the answer. A wait that ran to the timeout the client asked for
    // is not complete: the client would stop polling with rollouts still running.
    const endedEarly = (performance.now() - started) / 1000 < seconds - 0.05;
    return { rollouts: result, complete: endedEarly || result.length >= new Set(ids).size };
  } finally {
    for (const s of signals) s.removeEventListener("abort", onAbort!);
  }
}
