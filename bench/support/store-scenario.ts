/**
 * The batch scenario of Agent Lightning's benchmark_store.py against any LightningStore (see
 * bench/store.ts): enqueue in batches, N runners dequeue → report spans → succeed, the driver polls
 * waitForRollouts(0) until all are done; then the reference's checks on a sample.
 */
import type { LightningStore, SpanInput } from "@agl/core";
import { seededRandom } from "./seeded-random.js";

export interface ScenarioOptions {
  total: number;
  runners: number;
  maxRounds: number;
  batch: number;
  payload?: Payload;
  /** Stop after this many seconds even if rollouts remain (the rate counts the finished ones). */
  maxSeconds?: number;
}

// --- the agent's spans (benchmark_store.py: random flattened attributes, depth 1-3, breadth 2-6,
// keys 3-20 chars, values 5-300 chars)

let maxRounds = 3;
const { rand, randint, randomString } = seededRandom(42);

/** "reference": benchmark_store.py's attributes (~37 leaves, ~5.6 KB per span on average); "light": 3 short ones. */
export type Payload = "reference" | "light";
let payload: Payload = "reference";

/** Attribute sets are drawn from a pre-generated pool so that generating them costs the runners nothing. */
const pools = new Map<Payload, Array<Record<string, string>>>();
function randomAttributes(): Record<string, string> {
  let pool = pools.get(payload);
  if (!pool) pools.set(payload, (pool = Array.from({ length: 400 }, () => generateAttributes())));
  return pool[Math.floor(rand() * pool.length)]!;
}

function generateAttributes(): Record<string, string> {
  const out: Record<string, string> = {};
  if (payload === "light") {
    for (let i = 0; i < 3; i++) out[`attr.${i}`] = randomString(20, 60);
    return out;
  }
  const fill = (prefix: string, depth: number) => {
    const breadth = randint(2, 6);
    for (let i = 0; i < breadth; i++) {
      const key = `${prefix}${randomString(3, 20).replaceAll(" ", "_")}`;
      if (depth <= 1) out[key] = randomString(5, 300);
      else fill(`${key}.`, depth - 1);
    }
  };
  fill("", randint(1, 3));
  return out;
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");
let spanCounter = 0;

/** The spans one rollout reports (without sequence ids), as benchmark_store.py's agent produces them. */
type BenchSpan = Omit<SpanInput, "sequence_id"> &
  Pick<SpanInput, "rollout_id" | "attempt_id" | "span_id" | "name">;

function agentSpans(rolloutId: string, attemptId: string, task: string): BenchSpan[] {
  const traceId = hex(randint(0, 2 ** 30), 32);
  const spans: BenchSpan[] = [];
  const now = Date.now() / 1000;
  const span = (name: string, parentId: string | null, attributes: Record<string, unknown>) => {
    const spanId = hex(++spanCounter, 16);
    spans.push({
      rollout_id: rolloutId,
      attempt_id: attemptId,
      trace_id: traceId,
      span_id: spanId,
      parent_id: parentId,
      name,
      attributes,
      start_time: now,
      end_time: now,
      status: { status_code: "OK", description: null },
    });
    return spanId;
  };
  const reward = (value: number) =>
    span("agentlightning.annotation", null, {
      "agentlightning.reward.0.name": "primary",
      "agentlightning.reward.0.value": value,
    });
  const rounds = randint(1, maxRounds);
  const taskRound = randint(1, rounds);
  for (let i = 1; i <= rounds; i++) {
    const agent = span(`agent${i}`, null, { ...randomAttributes(), ...(i === taskRound ? { task } : {}) });
    span(`round${i}_1`, agent, randomAttributes());
    span(`round${i}_2`, agent, randomAttributes());
    if (rand() < 0.5) reward(rand());
  }
  span("final", null, randomAttributes());
  reward(1 + rand());
  return spans;
}

// --- the scenario

export interface RunResult {
  rollouts: number;
  spans: number;
  seconds: number;
  rollouts_per_s: number;
  spans_per_s: number;
}

export async function runBatch(store: LightningStore, opts: ScenarioOptions): Promise<RunResult> {
  const { total: TOTAL, runners: RUNNERS, batch: BATCH } = opts;
  maxRounds = opts.maxRounds;
  payload = opts.payload ?? "reference";
  await store.addResources({
    main_llm: {
      resource_type: "llm",
      endpoint: "http://127.0.0.1:9/v1",
      model: "bench",
      api_key: null,
      sampling_parameters: {},
    },
  });
  const started = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < TOTAL; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, TOTAL - i) }, (_, j) => ({
      input: { task: `task-${i + j}` },
    }));
    ids.push(...(await store.enqueueManyRollouts(batch)).map((r) => r.rollout_id));
  }
  let spans = 0;
  let done = false;
  const runner = async (n: number) => {
    const workerId = `Worker-${n}`;
    while (!done) {
      const claimed = await store.dequeueRollout({ workerId });
      if (!claimed) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      const task = (claimed.input as { task: string }).task;
      const body = agentSpans(claimed.rollout_id, claimed.attempt.attempt_id, task);
      const seqs = await store.getManySpanSequenceIds(
        body.map(() => [claimed.rollout_id, claimed.attempt.attempt_id] as const),
      );
      const stored = await store.addManySpans(
        body.map((s, i): SpanInput => ({ ...s, sequence_id: seqs[i]! }) as SpanInput),
      );
      spans += stored.length;
      await store.updateAttempt(claimed.rollout_id, claimed.attempt.attempt_id, { status: "succeeded" });
    }
  };
  const runners = Array.from({ length: RUNNERS }, (_, n) => runner(n));
  // The driver: poll wait_for_rollouts(timeout=0) as the batch mode does (every 250 ms here, not 5 s:
  // finer would make the driver's polls of every pending id a large share of the server's work).
  const pending = new Set(ids);
  const cap = started + (opts.maxSeconds ?? Number.POSITIVE_INFINITY) * 1000;
  while (pending.size > 0 && performance.now() < cap) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const finished = await store.waitForRollouts([...pending], { timeoutSeconds: 0 });
    for (const r of finished) pending.delete(r.rollout_id);
  }
  const seconds = (performance.now() - started) / 1000;
  const spansAtEnd = spans;
  done = true;
  await Promise.all(runners);
  const finished = ids.filter((id) => !pending.has(id));
  await check(store, finished);
  return {
    rollouts: finished.length,
    spans: spansAtEnd,
    seconds,
    rollouts_per_s: finished.length / seconds,
    spans_per_s: spansAtEnd / seconds,
  };
}

/** benchmark_store.py's checks on a sample: succeeded, the task is in the latest attempt's spans, final reward in [1,2]. */
async function check(store: LightningStore, ids: string[]): Promise<void> {
  if (ids.length === 0) throw new Error("no rollout finished");
  const succeeded = await store.queryRollouts({ rolloutIdIn: ids, statusIn: ["succeeded"], limit: 1 });
  if (succeeded.total !== ids.length)
    throw new Error(`only ${succeeded.total}/${ids.length} rollouts succeeded`);
  for (const id of ids.filter((_, i) => i % Math.ceil(ids.length / 20) === 0)) {
    const rollout = await store.getRolloutById(id);
    const spans = (await store.querySpans(id, { attemptId: "latest" })).items;
    if (!rollout) throw new Error(`rollout ${id} is missing`);
    const task = (rollout.input as { task: string }).task;
    if (!spans.some((s) => s.attributes.task === task))
      throw new Error(`task missing from the spans of ${id}`);
    const rewards = spans.filter((s) => s.name === "agentlightning.annotation");
    const final = rewards[rewards.length - 1]?.attributes["agentlightning.reward.0.value"] as number;
    if (!(final >= 1 && final <= 2)) throw new Error(`final reward of ${id} is ${final}`);
  }
}
