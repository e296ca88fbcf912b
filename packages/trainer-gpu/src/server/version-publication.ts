import type { GenerationEngine } from "../generate/engine.js";
import { Generator, type GeneratorOptions } from "../generate/generator.js";
import {
  type GenerateRequest,
  type GenerateResult,
  type VersionSegment,
  withModelVersion,
} from "../generate/request.js";
import type { Seq } from "../generate/sequence.js";
import type { CausalLM } from "../model/causal-lm.js";
import type { TextTokenizer } from "../tokenizer/text-tokenizer.js";

/** One published policy version: a snapshot of the weights and the generator decoding with it. */
interface Slot {
  version: number;
  model: CausalLM;
  generator: Generator;
  /** Requests (groups) admitted on this version and not finished yet. */
  inflight: number;
  /** Its snapshot went to the spare (or was freed): releasing it again must not free the spare. */
  retired?: boolean;
}

export interface VersionedEngineOptions extends GeneratorOptions {
  /**
   * What a publication does to requests in flight. "finish" (default): they finish on the version they
   * started on. "resume" (partial rollouts): at the next step boundary every running or queued sequence
   * moves to the new version — prefilled again with its prompt and the tokens generated so far, the old
   * keys/values dropped — and decodes on there. Its result then records which version produced which
   * tokens (`versionSegments`); each token's logprob is the one it was sampled with. Requests with
   * `pinVersion` (streamed responses) always finish on their version.
   */
  inFlight?: "finish" | "resume";
}

/** A `generateMany` call in "resume" mode: the slot it runs on now and each request's version segments. */
interface Call {
  slot: Slot;
  segments: Map<GenerateRequest, VersionSegment[]>;
}

/**
 * A generation engine that serves snapshots of a model being trained, for asynchronous training: the
 * trainer updates `source` in place while requests are served from a copy, and `publish()` makes a new
 * copy the served version between requests, without a pause. Requests already running (or queued) on
 * the old version finish on it — their weights stay alive until then, so no sequence ever mixes two
 * versions — while new requests start on the new one. A retired snapshot is kept as the spare for the
 * next publication (a weight copy, no new allocation), so steady state holds at most three copies:
 * the served one, one still finishing, and the spare.
 */
export class VersionedEngine implements GenerationEngine {
  private current: Slot;
  private readonly retiring = new Set<Slot>();
  private spare: CausalLM | null = null;
  private paused = false;
  private drainWaiters: Array<() => void> = [];
  private disposed = false;
  private readonly inFlight: "finish" | "resume";
  private readonly options: GeneratorOptions;
  /** The call each running request (as handed to a generator) belongs to, in "resume" mode. */
  private readonly calls = new Map<GenerateRequest, Call>();

  constructor(
    private readonly source: CausalLM,
    private readonly tokenizer: TextTokenizer,
    options: VersionedEngineOptions = {},
  ) {
    const { inFlight = "finish", ...generatorOptions } = options;
    this.inFlight = inFlight;
    this.options = generatorOptions;
    this.current = this.slot(0, source.clone({ trainable: false }));
  }

  /** The served snapshot (its config is the source's). */
  get policy(): CausalLM {
    return this.current.model;
  }
  get version(): number {
    return this.current.version;
  }
  get activeCount(): number {
    return this.slots().reduce((a, s) => a + s.generator.activeCount, 0);
  }
  get queuedCount(): number {
    return this.slots().reduce((a, s) => a + s.generator.queuedCount, 0);
  }
  get isPaused(): boolean {
    return this.paused;
  }
  /** Versions with requests still running, the served one included (for tests and /health). */
  get liveVersions(): number[] {
    return this.slots().map((s) => s.version);
  }

  /** Decode steps run so far on every live version. */
  get steps(): number {
    return this.slots().reduce((a, s) => a + s.generator.steps, 0);
  }

  async generateMany(requests: readonly GenerateRequest[]): Promise<GenerateResult[]> {
    if (this.inFlight === "resume" && !requests.some((r) => r.pinVersion)) return this.resumable(requests);
    // Bound to a version at arrival: a publication while it queues or runs does not move it.
    const slot = this.current;
    slot.inflight++;
    try {
      const results = await slot.generator.generateMany(withModelVersion(requests, slot.version));
      return results.map((r) => ({ ...r, modelVersion: slot.version }));
    } finally {
      slot.inflight--;
      if (slot !== this.current) this.release(slot);
    }
  }

  /** Serve `source`'s current weights as the next version from now on; returns that version. */
  publish(): number {
    if (this.disposed) throw new Error("VersionedEngine is disposed");
    const model = this.spare ?? this.source.clone({ trainable: false });
    if (this.spare) model.setWeightsFrom(this.source);
    this.spare = null;
    const old = this.current;
    this.current = this.slot(old.version + 1, model);
    if (this.paused) void this.current.generator.pause();
    if (this.inFlight === "resume") {
      for (const s of [old, ...this.retiring])
        s.generator.handOff(
          (r) => this.calls.has(r),
          (q) => this.adopt(q),
        );
    }
    this.release(old);
    return this.current.version;
  }

  /** Stop admitting on every version; resolves when no sequence is running on any of them. */
  async pause(): Promise<void> {
    this.paused = true;
    await Promise.all(this.slots().map((s) => s.generator.pause()));
    if (this.retiring.size > 0) await new Promise<void>((r) => this.drainWaiters.push(r));
  }

  /** Resume admission; `weightsChanged` (the source was updated in place) publishes a new version. */
  resume(options: { weightsChanged?: boolean } = {}): void {
    if (options.weightsChanged) this.publish();
    this.paused = false;
    for (const s of this.slots()) s.generator.resume();
  }

  /** Apply an update to the source (a model to copy from, or a callback) and publish it, without a pause. */
  async swapWeights(apply?: CausalLM | ((model: CausalLM) => void | Promise<void>)): Promise<number> {
    if (typeof apply === "function") await apply(this.source);
    else if (apply) this.source.setWeightsFrom(apply);
    return this.publish();
  }

  /** Free every snapshot (the source is the caller's). */
  dispose(): void {
    this.disposed = true;
    for (const s of this.slots()) s.model.dispose();
    this.spare?.dispose();
    this.spare = null;
    this.retiring.clear();
  }

  /**
   * A call whose sequences move to each newly published version ("resume"); the requests are copied so
   * each is its own key, and token events report the version producing the token.
   */
  private async resumable(requests: readonly GenerateRequest[]): Promise<GenerateResult[]> {
    const call: Call = { slot: this.current, segments: new Map() };
    const own = requests.map((r) => {
      const segments = [{ version: call.slot.version, fromToken: 0 }];
      const onToken = r.onToken;
      const req: GenerateRequest = onToken
        ? { ...r, onToken: (e) => onToken({ ...e, modelVersion: segments.at(-1)!.version }) }
        : { ...r };
      call.segments.set(req, segments);
      this.calls.set(req, call);
      return req;
    });
    call.slot.inflight++;
    try {
      const results = await call.slot.generator.generateMany(own);
      return results.map((r, i) => {
        const segments = call.segments.get(own[i] as GenerateRequest) as VersionSegment[];
        const version = segments.at(-1)!.version;
        return segments.length > 1
          ? { ...r, modelVersion: version, versionSegments: segments }
          : { ...r, modelVersion: version };
      });
    } finally {
      for (const r of own) this.calls.delete(r);
      call.slot.inflight--;
      if (call.slot !== this.current) this.release(call.slot);
    }
  }

  /** Sequences handed off by an older version continue on the served one (see `publish`). */
  private adopt(seqs: Seq[]): void {
    if (seqs.length === 0) return;
    const to = this.current;
    const moved = new Set<Call>();
    for (const s of seqs) {
      const call = this.calls.get(s.req) as Call;
      const segments = call.segments.get(s.req) as VersionSegment[];
      // A sequence that had not started yet simply starts on the new version.
      if (segments.at(-1)!.fromToken === s.tokens.length) segments.pop();
      segments.push({ version: to.version, fromToken: s.tokens.length });
      moved.add(call);
    }
    to.generator.adopt(seqs);
    for (const call of moved) {
      const from = call.slot;
      if (from === to) continue;
      call.slot = to;
      to.inflight++;
      from.inflight--;
      if (from !== this.current) this.release(from);
    }
  }

  private slot(version: number, model: CausalLM): Slot {
    return { version, model, generator: new Generator(model, this.tokenizer, this.options), inflight: 0 };
  }

  private slots(): Slot[] {
    return [this.current, ...this.retiring];
  }

  /** A superseded version: kept while requests run on it, then its snapshot becomes the spare. */
  private release(slot: Slot): void {
    if (slot.retired) return;
    if (slot.inflight > 0) {
      this.retiring.add(slot);
      return;
    }
    slot.retired = true;
    this.retiring.delete(slot);
    if (this.disposed) return;
    if (this.spare === null) this.spare = slot.model;
    else slot.model.dispose();
    if (this.retiring.size === 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    }
  }
}
