/**
 * Model-based test for any LightningStore: fast-check generates random command sequences (enqueue,
 * start, dequeue, start attempt, attempt/rollout status updates including illegal ones, spans with
 * and without explicit sequence ids, duplicates, heartbeats, resources, queries) and runs them against both the
 * store and the independent reference model in ./model/reference.ts, asserting after every step that
 * they agree on statuses, attempt counts, sequence ids, queue order, resources and errors.
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import { IllegalTransitionError, NotFoundError } from "../errors.js";
import type { LightningStore } from "../store/store.js";
import type { AttemptedRollout } from "../types/rollout.js";
import { expectError, type StoreFactory } from "./helpers.js";
import {
  type ModelAttemptStatus,
  type ModelRollout,
  type ModelRolloutStatus,
  StoreModel,
} from "./model/reference.js";

export interface StoreModelOptions {
  /** fast-check runs (default 60). */
  numRuns?: number;
  /** Longest command sequence (default 30). */
  maxCommands?: number;
  /** Reproduce a failure. */
  seed?: number;
  /** Per-test timeout in ms (default 60 s). */
  timeoutMs?: number;
}

type Cmd = fc.AsyncCommand<StoreModel, LightningStore>;

const ROLLOUT_STATUSES: ModelRolloutStatus[] = [
  "queuing",
  "preparing",
  "running",
  "failed",
  "succeeded",
  "cancelled",
  "requeuing",
];
const ATTEMPT_STATUSES: ModelAttemptStatus[] = [
  "preparing",
  "running",
  "failed",
  "succeeded",
  "unresponsive",
  "timeout",
];
const RETRYABLE: ModelAttemptStatus[] = ["failed", "timeout", "unresponsive"];

const pick = <T>(items: readonly T[], n: number): T => items[n % items.length]!;

/** Compare one rollout (status, attempts, resources id) between the store and the model. */
async function agree(real: LightningStore, r: ModelRollout): Promise<void> {
  const got = await real.getRolloutById(r.id);
  expect(got?.status, `status of ${r.id}`).toBe(r.status);
  expect(got?.resources_id ?? null).toBe(r.resourcesId);
  const attempts = await real.queryAttempts(r.id);
  expect(attempts.items.map((a) => [a.attempt_id, a.status])).toEqual(
    r.attempts.map((a) => [a.id, a.status]),
  );
  expect(attempts.items.map((a) => a.sequence_id)).toEqual(r.attempts.map((_, i) => i + 1));
  if (r.attempts.length > 0) expect((got as AttemptedRollout).attempt.attempt_id).toBe(r.attempts.at(-1)!.id);
}

class NewRollout implements Cmd {
  constructor(
    readonly direct: boolean,
    readonly maxAttempts: number,
    readonly retryOn: ModelAttemptStatus[],
  ) {}
  check = () => true;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const config = { max_attempts: this.maxAttempts, retry_condition: this.retryOn };
    if (this.direct) {
      const started = await real.startRollout({ input: m.rollouts.length, config });
      m.addRollout({
        id: started.rollout_id,
        status: "preparing",
        maxAttempts: this.maxAttempts,
        retryOn: this.retryOn,
      });
      m.addAttempt(m.find(started.rollout_id)!, started.attempt.attempt_id);
      expect(started.attempt.sequence_id).toBe(1);
      await agree(real, m.find(started.rollout_id)!);
    } else {
      const queued = await real.enqueueRollout({ input: m.rollouts.length, config });
      m.addRollout({
        id: queued.rollout_id,
        status: "queuing",
        maxAttempts: this.maxAttempts,
        retryOn: this.retryOn,
      });
      await agree(real, m.find(queued.rollout_id)!);
    }
  }
  toString = () => `${this.direct ? "start" : "enqueue"}(max=${this.maxAttempts}, retry=[${this.retryOn}])`;
}

class Dequeue implements Cmd {
  check = () => true;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const expected = m.takeNext();
    const got = await real.dequeueRollout({ workerId: "model-worker" });
    expect(got?.rollout_id ?? null).toBe(expected?.id ?? null);
    if (!expected || !got) return;
    expect(got.attempt.sequence_id).toBe(expected.attempts.length + 1);
    m.addAttempt(expected, got.attempt.attempt_id);
    await agree(real, expected);
  }
  toString = () => "dequeue()";
}

class StartAttempt implements Cmd {
  constructor(readonly r: number) {}
  check = (m: Readonly<StoreModel>) => m.rollouts.length > 0;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const r = pick(m.rollouts, this.r);
    const got = await real.startAttempt(r.id);
    expect(got.attempt.sequence_id).toBe(r.attempts.length + 1);
    m.addAttempt(r, got.attempt.attempt_id);
    await agree(real, r);
  }
  toString = () => `startAttempt(#${this.r})`;
}

class UpdateAttempt implements Cmd {
  constructor(
    readonly r: number,
    readonly a: number | "latest",
    readonly status: ModelAttemptStatus,
  ) {}
  check = (m: Readonly<StoreModel>) => m.rollouts.length > 0;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const r = pick(m.rollouts, this.r);
    if (r.attempts.length === 0) {
      await expectError(real.updateAttempt(r.id, "latest", { status: this.status }), NotFoundError);
      return;
    }
    const index = this.a === "latest" ? r.attempts.length - 1 : this.a % r.attempts.length;
    const aid = this.a === "latest" ? "latest" : r.attempts[index]!.id;
    const before = r.attempts[index]!.status;
    if (m.setAttempt(r, index, this.status)) {
      const got = await real.updateAttempt(r.id, aid, { status: this.status });
      expect(got.status).toBe(this.status);
    } else {
      const err = await expectError<IllegalTransitionError>(
        real.updateAttempt(r.id, aid, { status: this.status }),
        IllegalTransitionError,
      );
      expect([err.from, err.to]).toEqual([before, this.status]);
    }
    await agree(real, r);
  }
  toString = () => `updateAttempt(#${this.r}, ${this.a}, ${this.status})`;
}

class UpdateRollout implements Cmd {
  constructor(
    readonly r: number,
    readonly status: ModelRolloutStatus,
  ) {}
  check = (m: Readonly<StoreModel>) => m.rollouts.length > 0;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const r = pick(m.rollouts, this.r);
    if (m.setRollout(r, this.status)) {
      expect((await real.updateRollout(r.id, { status: this.status })).status).toBe(this.status);
    } else {
      await expectError(real.updateRollout(r.id, { status: this.status }), IllegalTransitionError);
    }
    await agree(real, r);
  }
  toString = () => `updateRollout(#${this.r}, ${this.status})`;
}

class AddSpan implements Cmd {
  constructor(
    readonly r: number,
    readonly a: number,
    readonly explicitSeq: number | null,
    readonly duplicate: boolean,
  ) {}
  check = (m: Readonly<StoreModel>) => m.rollouts.length > 0;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const r = pick(m.rollouts, this.r);
    const base = { trace_id: "0".repeat(32), name: "model.span", sequence_id: this.explicitSeq ?? 1 };
    if (r.attempts.length === 0) {
      const span = { ...base, rollout_id: r.id, attempt_id: "at-00000000", span_id: "f".repeat(16) };
      await expectError(real.addSpan(span), NotFoundError);
      return;
    }
    const index = this.a % r.attempts.length;
    const aid = r.attempts[index]!.id;
    const prefix = `${r.id}/${aid}/`;
    const used = [...m.spanKeys].filter((k) => k.startsWith(prefix));
    const isDuplicate = this.duplicate && used.length > 0;
    const spanId = isDuplicate
      ? used[0]!.slice(prefix.length)
      : (m.spanKeys.size + 1).toString(16).padStart(16, "0");
    const seq = this.explicitSeq ?? (await real.getNextSpanSequenceId(r.id, aid));
    if (this.explicitSeq === null) expect(seq).toBe(m.nextSeq(r.id));
    const stored = await real.addSpan({
      ...base,
      sequence_id: seq,
      rollout_id: r.id,
      attempt_id: aid,
      span_id: spanId,
    });
    if (isDuplicate) {
      expect(stored).toBeNull();
    } else {
      expect(stored?.sequence_id).toBe(seq);
      m.spanKeys.add(prefix + spanId);
      m.bumpSeq(r.id, seq);
      m.activity(r, index);
    }
    await agree(real, r);
  }
  toString = () => `addSpan(#${this.r}, attempt ${this.a}, seq=${this.explicitSeq}, dup=${this.duplicate})`;
}

class Heartbeat implements Cmd {
  constructor(
    readonly r: number,
    readonly a: number,
  ) {}
  check = (m: Readonly<StoreModel>) => m.rollouts.length > 0;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const r = pick(m.rollouts, this.r);
    if (r.attempts.length === 0) return;
    const index = this.a % r.attempts.length;
    const got = await real.updateAttempt(r.id, r.attempts[index]!.id, {
      last_heartbeat_time: Date.now() / 1000,
    });
    m.activity(r, index);
    expect(got.status).toBe(r.attempts[index]!.status);
    await agree(real, r);
  }
  toString = () => `heartbeat(#${this.r}, attempt ${this.a})`;
}

class NextSeq implements Cmd {
  constructor(readonly r: number) {}
  check = (m: Readonly<StoreModel>) => m.rollouts.length > 0;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const r = pick(m.rollouts, this.r);
    expect(await real.getNextSpanSequenceId(r.id, r.attempts.at(-1)?.id ?? "none")).toBe(m.nextSeq(r.id));
  }
  toString = () => `nextSeq(#${this.r})`;
}

class PutResources implements Cmd {
  constructor(readonly existing: number | null) {}
  check = () => true;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const named = {
      p: { resource_type: "prompt_template" as const, template: "t", engine: "f-string" as const },
    };
    let got: Awaited<ReturnType<LightningStore["addResources"]>>;
    if (this.existing !== null && m.resources.length > 0) {
      const id = pick(m.resources, this.existing).id;
      got = await real.updateResources(id, named);
      expect(got.version).toBe(m.putResources(id));
    } else {
      got = await real.addResources(named);
      expect(got.version).toBe(m.putResources(got.resources_id));
    }
    expect((await real.getLatestResources())?.resources_id).toBe(m.latestResources);
    const all = await real.queryResources();
    expect(all.items.map((x) => [x.resources_id, x.version])).toEqual(
      m.resources.map((x) => [x.id, x.version]),
    );
  }
  toString = () => `putResources(${this.existing === null ? "new" : `#${this.existing}`})`;
}

class Query implements Cmd {
  constructor(readonly statuses: ModelRolloutStatus[]) {}
  check = () => true;
  async run(m: StoreModel, real: LightningStore): Promise<void> {
    const page = await real.queryRollouts({ statusIn: this.statuses });
    const expected = m.rollouts.filter((r) => this.statuses.includes(r.status)).map((r) => r.id);
    expect(page.items.map((r) => r.rollout_id)).toEqual(expected);
    expect(page.total).toBe(expected.length);
    const stats = await real.statistics();
    expect(stats.total_rollouts).toBe(m.rollouts.length);
    expect(stats.total_attempts).toBe(m.rollouts.reduce((n, r) => n + r.attempts.length, 0));
    expect(stats.total_spans).toBe(m.spanKeys.size);
  }
  toString = () => `query([${this.statuses}])`;
}

const commandArbs: Array<fc.Arbitrary<Cmd>> = [
  fc
    .tuple(fc.boolean(), fc.integer({ min: 1, max: 3 }), fc.subarray(RETRYABLE))
    .map(([direct, max, retry]) => new NewRollout(direct, max, retry)),
  fc.constant(new Dequeue()),
  fc.nat().map((r) => new StartAttempt(r)),
  fc
    .tuple(fc.nat(), fc.oneof(fc.constant("latest" as const), fc.nat()), fc.constantFrom(...ATTEMPT_STATUSES))
    .map(([r, a, s]) => new UpdateAttempt(r, a, s)),
  fc.tuple(fc.nat(), fc.constantFrom(...ROLLOUT_STATUSES)).map(([r, s]) => new UpdateRollout(r, s)),
  fc
    .tuple(fc.nat(), fc.nat(), fc.option(fc.integer({ min: 1, max: 40 })), fc.boolean())
    .map(([r, a, seq, dup]) => new AddSpan(r, a, seq, dup)),
  fc.nat().map((r) => new NextSeq(r)),
  fc.tuple(fc.nat(), fc.nat()).map(([r, a]) => new Heartbeat(r, a)),
  fc.option(fc.nat()).map((e) => new PutResources(e)),
  fc.subarray(ROLLOUT_STATUSES, { minLength: 1 }).map((s) => new Query(s)),
];

/** Register a vitest test running the model-based property against stores made by `factory`. */
export function describeStoreModel(
  name: string,
  factory: StoreFactory,
  options: StoreModelOptions = {},
): void {
  const { numRuns = 60, maxCommands = 30, seed, timeoutMs = 60_000 } = options;
  it(
    `LightningStore model-based test: ${name}`,
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.commands(commandArbs, { maxCommands }), async (cmds) => {
          const { store, cleanup } = await factory();
          try {
            await fc.asyncModelRun(() => ({ model: new StoreModel(), real: store }), cmds);
          } finally {
            await store.close();
            await cleanup?.();
          }
        }),
        { numRuns, seed, verbose: 1 },
      );
    },
    timeoutMs,
  );
}
