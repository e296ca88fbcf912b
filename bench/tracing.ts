/**
 * Tracing benchmark: spans/s from agent code into the store, ours vs the reference's submission path.
 *  - ours: LightningTracer + RolloutTrace (async-context attribution, one getManySpanSequenceIds and one
 *    addManySpans per batch of spans ended in the same tick);
 *  - baseline: what Agent Lightning v0.3's LightningSpanProcessor does: each span, on end, is written on
 *    its own with `addOtelSpan` (which allocates its sequence id), i.e. one store round trip per span.
 * Both run ROLLOUTS concurrent rollouts of SPANS spans each (spans ended in bursts of 10 with an await
 * between bursts, like an agent between LLM calls), against an InMemoryLightningStore directly and
 * through a wrapper adding RTT_MS of latency per store call (a store server on the LAN).
 *
 *   pnpm exec tsx bench/tracing.ts
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  InMemoryLightningStore,
  type LightningStore,
  LightningTracer,
  type LightningTracerOptions,
  silentLogger,
} from "@agl/core";

type SpanProcessor = NonNullable<LightningTracerOptions["spanProcessors"]>[number];
type ReadableSpan = Parameters<SpanProcessor["onEnd"]>[0];

const ROLLOUTS = Number(process.env.ROLLOUTS ?? 100);
const SPANS = Number(process.env.SPANS ?? 100);
const RTT_MS = Number(process.env.RTT_MS ?? 1);
const here = dirname(fileURLToPath(import.meta.url));

function withLatency(store: LightningStore, ms: number): LightningStore {
  if (ms <= 0) return store;
  return new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (typeof v !== "function") return v;
      return async (...args: unknown[]) => {
        await new Promise((r) => setTimeout(r, ms));
        return v.apply(target, args);
      };
    },
  });
}

async function agentBody(startSpan: (name: string) => { end(): void }) {
  for (let i = 0; i < SPANS; i += 10) {
    for (let k = 0; k < 10 && i + k < SPANS; k++) startSpan(`step.${i + k}`).end();
    await new Promise((r) => setImmediate(r));
  }
}

async function ours(rtt: number): Promise<number> {
  const memory = new InMemoryLightningStore();
  const store = withLatency(memory, rtt);
  const tracer = new LightningTracer({ logger: silentLogger });
  const rollouts = await Promise.all(
    Array.from({ length: ROLLOUTS }, (_, i) => memory.startRollout({ input: i })),
  );
  const t0 = performance.now();
  await Promise.all(
    rollouts.map(async (r) => {
      const trace = tracer.traceAttempt({ rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id, store });
      await trace.run(() => agentBody((name) => tracer.startSpan(name)));
      await trace.flush();
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const stored = (await memory.statistics()).total_spans;
  if (stored !== ROLLOUTS * SPANS) throw new Error(`ours stored ${stored} spans`);
  await memory.close();
  return (ROLLOUTS * SPANS) / seconds;
}

async function baseline(rtt: number): Promise<number> {
  const memory = new InMemoryLightningStore();
  const store = withLatency(memory, rtt);
  const ids = new AsyncLocalStorage<{ rid: string; aid: string; pending: Promise<unknown>[] }>();
  const owners = new WeakMap<object, { rid: string; aid: string; pending: Promise<unknown>[] }>();
  const processor: SpanProcessor = {
    onStart: (span) => {
      const owner = ids.getStore();
      if (owner) owners.set(span, owner);
    },
    onEnd: (span: ReadableSpan) => {
      const owner = owners.get(span);
      if (owner) owner.pending.push(store.addOtelSpan(owner.rid, owner.aid, span));
    },
    forceFlush: async () => {},
    shutdown: async () => {},
  };
  // Our span processor on this provider is inert here: no rollout context is ever entered.
  const tracer = new LightningTracer({ spanProcessors: [processor], logger: silentLogger }).otelTracer;
  const rollouts = await Promise.all(
    Array.from({ length: ROLLOUTS }, (_, i) => memory.startRollout({ input: i })),
  );
  const t0 = performance.now();
  await Promise.all(
    rollouts.map(async (r) => {
      const owner = { rid: r.rollout_id, aid: r.attempt.attempt_id, pending: [] as Promise<unknown>[] };
      await ids.run(owner, () => agentBody((name) => tracer.startSpan(name)));
      await Promise.all(owner.pending);
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const stored = (await memory.statistics()).total_spans;
  if (stored !== ROLLOUTS * SPANS) throw new Error(`baseline stored ${stored} spans`);
  await memory.close();
  return (ROLLOUTS * SPANS) / seconds;
}

async function main() {
  const rows: Array<{ store: string; ours: number; baseline: number; ratio: number }> = [];
  for (const [label, rtt] of [
    ["in-memory", 0],
    [`in-memory + ${RTT_MS} ms per call`, RTT_MS],
  ] as const) {
    await ours(rtt); // warm-up
    await baseline(rtt);
    const o = await ours(rtt);
    const b = await baseline(rtt);
    rows.push({
      store: label,
      ours: Math.round(o),
      baseline: Math.round(b),
      ratio: Number((o / b).toFixed(2)),
    });
    console.log(
      `${label}: ours ${Math.round(o)} spans/s, baseline ${Math.round(b)} spans/s, ratio ${(o / b).toFixed(2)}x`,
    );
  }
  const meta = {
    rollouts: ROLLOUTS,
    spansPerRollout: SPANS,
    rttMs: RTT_MS,
    node: process.version,
    cpus: cpus().length,
  };
  mkdirSync(join(here, "results"), { recursive: true });
  writeFileSync(join(here, "results/tracing.json"), `${JSON.stringify({ ...meta, rows }, null, 2)}\n`);
  const md = [
    "# Tracing benchmark (spans/s from agent code into the store)",
    "",
    `${ROLLOUTS} concurrent rollouts x ${SPANS} spans, Node ${process.version}, ${cpus().length} CPUs. Baseline = one`,
    "addOtelSpan per span on end (Agent Lightning v0.3's direct path); ours = batched per tick.",
    "",
    "| store | ours (spans/s) | baseline (spans/s) | ratio |",
    "|---|---|---|---|",
    ...rows.map((r) => `| ${r.store} | ${r.ours} | ${r.baseline} | ${r.ratio}x |`),
    "",
  ].join("\n");
  writeFileSync(join(here, "results/tracing.md"), md);
}

await main();
