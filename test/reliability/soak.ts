/**
 * The soak: rollouts run by worker processes that are SIGKILLed at random while the store server is
 * SIGKILLed and restarted, then the invariants: every rollout enqueued exactly once, finished, with
 * at most one succeeded attempt, and every succeeded attempt has all its spans (message + reward).
 */
import { LightningStoreClient } from "@agl/client";
import type { Attempt, Rollout, Span } from "@agl/core";
import type { Child } from "../store-http/processes.js";
import { RestartableStore, spawnSoakWorker } from "./processes.js";

export interface SoakOptions {
  db: string;
  rollouts: number;
  workers: number;
  workerKills: number;
  storeRestarts: number;
  attemptTimeoutSeconds: number;
  timeoutMs: number;
  /**
   * How the store is taken away `storeRestarts` times: "kill" (SIGKILL, restart on the same database
   * and port; the default) or "freeze" (SIGSTOP for 2-12 s, then SIGCONT: the in-memory backend,
   * which a kill would wipe).
   */
  storeOutage?: "kill" | "freeze";
}

export interface SoakResult {
  rollouts: number;
  succeeded: number;
  failed: number;
  lost: number;
  /** Rollouts enqueued more than once (same input) or with more than one succeeded attempt. */
  doubled: number;
  doubledIds: string[];
  stuck: number;
  succeededWithoutSpans: number;
  workerKills: number;
  storeRestarts: number;
  storeFreezes: number;
  attempts: number;
  /** Attempts by final status: `unresponsive` and `failed` (superseded) show the retry paths were taken. */
  attemptStatuses: Record<string, number>;
  seconds: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  const started = performance.now();
  const store = await RestartableStore.start(o.db);
  const client = new LightningStoreClient({ url: store.url, timeoutMs: 30_000 });
  const workers: Child[] = [];
  try {
    await client.addResources({});
    const enqueued: Rollout[] = [];
    for (let i = 0; i < o.rollouts; i += 500) {
      const batch = Array.from({ length: Math.min(500, o.rollouts - i) }, (_, k) => ({
        input: { i: i + k, sleepMs: 10 + ((i + k) % 5) * 10 },
        config: {
          max_attempts: 50,
          // "unresponsive" too: an attempt marked unresponsive (its heartbeats lost in a store
          // outage) and retried may still succeed afterwards; the store lets that late success win
          // and supersedes the retry, so the rollout still has exactly one succeeded attempt.
          retry_condition: ["failed", "timeout", "unresponsive"] as Attempt["status"][],
          timeout_seconds: o.attemptTimeoutSeconds,
          unresponsive_seconds: Math.max(3, Math.floor(o.attemptTimeoutSeconds / 3)),
        },
      }));
      enqueued.push(...(await client.enqueueManyRollouts(batch)));
    }
    for (let w = 0; w < o.workers; w++) workers.push(spawnSoakWorker(store.url));

    // Chaos, spread over the run: kills while rollouts are still queued.
    const plan: Array<"worker" | "store"> = [
      ...Array.from({ length: o.workerKills }, () => "worker" as const),
      ...Array.from({ length: o.storeRestarts }, () => "store" as const),
    ];
    for (let i = plan.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [plan[i], plan[j]] = [plan[j]!, plan[i]!];
    }
    let workerKills = 0;
    const deadline = performance.now() + o.timeoutMs;
    const remaining = async () => {
      const open = await client.queryRollouts({
        statusIn: ["queuing", "preparing", "running", "requeuing"],
        limit: 1,
      });
      return open.total;
    };
    for (const event of plan) {
      // Pace the chaos by progress: the next event once another share of the rollouts is done.
      const target = o.rollouts * (1 - (plan.indexOf(event) + 1) / (plan.length + 2));
      for (;;) {
        if (performance.now() > deadline) break;
        let left: number;
        try {
          left = await remaining();
        } catch {
          await sleep(200);
          continue;
        }
        if (left <= target) break;
        await sleep(50);
      }
      if (event === "store" && o.storeOutage === "freeze") {
        // Up to 12 s: longer than the workers' 10 s request timeout and the 5 s unresponsive limit.
        await store.freeze(2000 + Math.random() * 10_000);
      } else if (event === "store") {
        await store.killAndRestart(300 + Math.random() * 700);
      } else {
        const index = Math.floor(Math.random() * workers.length);
        workers[index]!.proc.kill("SIGKILL");
        await workers[index]!.exited;
        workers[index] = spawnSoakWorker(store.url);
        workerKills++;
      }
    }
    // Let everything finish (killed workers' attempts come back through the watchdog).
    while (performance.now() < deadline) {
      try {
        if ((await remaining()) === 0) break;
      } catch {
        // The store may still be coming back.
      }
      await sleep(250);
    }
    return {
      ...(await check(client, enqueued)),
      workerKills,
      storeRestarts: store.restarts,
      storeFreezes: store.freezes,
      seconds: Math.round((performance.now() - started) / 100) / 10,
    };
  } finally {
    for (const w of workers) w.proc.kill("SIGKILL");
    await Promise.all(workers.map((w) => w.exited));
    await client.close();
    await store.kill();
  }
}

async function check(
  client: LightningStoreClient,
  enqueued: Rollout[],
): Promise<Omit<SoakResult, "workerKills" | "storeRestarts" | "storeFreezes" | "seconds">> {
  const all = (await client.queryRollouts({ limit: -1 })).items;
  const byId = new Map(all.map((r) => [r.rollout_id, r]));
  const inputs = new Map<number, number>();
  for (const r of all) {
    const i = (r.input as { i: number }).i;
    inputs.set(i, (inputs.get(i) ?? 0) + 1);
  }
  let lost = 0;
  let stuck = 0;
  let succeeded = 0;
  let failed = 0;
  const doubledIds: string[] = [];
  for (const r of all) if ((inputs.get((r.input as { i: number }).i) ?? 0) > 1) doubledIds.push(r.rollout_id);
  let succeededWithoutSpans = 0;
  let attempts = 0;
  const attemptStatuses: Record<string, number> = {};
  for (const e of enqueued) {
    const r = byId.get(e.rollout_id);
    if (!r) {
      lost++;
      continue;
    }
    if (!["succeeded", "failed", "cancelled"].includes(r.status)) stuck++;
    if (r.status === "failed") failed++;
    const tried = (await client.queryAttempts(r.rollout_id, { limit: -1 })).items;
    attempts += tried.length;
    for (const a of tried) attemptStatuses[a.status] = (attemptStatuses[a.status] ?? 0) + 1;
    const wins = tried.filter((a) => a.status === "succeeded");
    if (wins.length > 1) doubledIds.push(`${r.rollout_id} (${wins.length} succeeded attempts)`);
    if (r.status !== "succeeded") continue;
    succeeded++;
    const spans: Span[] = (
      await client.querySpans(r.rollout_id, { attemptId: wins[0]?.attempt_id ?? "latest" })
    ).items;
    const names = new Set(spans.map((s) => s.name));
    if (!names.has("agentlightning.message") || !names.has("agentlightning.annotation"))
      succeededWithoutSpans++;
  }
  return {
    rollouts: enqueued.length,
    succeeded,
    failed,
    lost,
    doubled: doubledIds.length,
    doubledIds: doubledIds.slice(0, 20),
    stuck,
    succeededWithoutSpans,
    attempts,
    attemptStatuses,
  };
}
