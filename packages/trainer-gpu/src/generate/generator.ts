import * as tf from "@tensorflow/tfjs";
import type { CausalLM } from "../model/causal-lm.js";
import { gatherRows } from "../pretrained/gather-rows.js";
import { IncrementalDecoder, type TextTokenizer } from "../tokenizer/text-tokenizer.js";
import { BatchCache } from "./batch-cache.js";
import type { GenerationEngine } from "./engine.js";
import { HandOffs, renumberGroups } from "./hand-off.js";
import { type PrefilledGroup, prefillPrompts } from "./prefill-groups.js";
import { PrefixCache, type PrefixCacheOptions, type PrefixCacheStats, weightsStamp } from "./prefix-cache.js";
import type { GenerateRequest, GenerateResult } from "./request.js";
import { requestError } from "./request-checks.js";
import { modelSamplingDefaults, type SamplingDefaults } from "./sampling-defaults.js";
import {
  adapterRows,
  appendToken,
  byAdapter,
  newSeq,
  prefillIds,
  type Seq,
  sampleNext,
  settle,
  watchAbort,
} from "./sequence.js";

/**
 * The generation engine: a dynamic-batching scheduler over one KV cache.
 *
 * All running sequences share one right-aligned cache `[S, H, L, dh]` (see batch-cache.ts); a request that
 * arrives mid-flight is prefilled (reusing cached prompt prefixes, see prefix-cache.ts) and joins as a new
 * row. Sampling runs per sequence with its own seeded RNG, so a request gets the same tokens whether it
 * runs alone or joins a busy batch.
 *
 * Every request handed over settles, with a result or an error: a failed prefill fails the requests being
 * admitted with it (per adapter) and nothing else, a failed decode step fails the running batch, and queued
 * requests are admitted after either. (A request left unsettled hangs its client, or lets a process with
 * nothing else pending exit mid-run.)
 */

export interface GeneratorOptions {
  /** Most sequences decoded together (default 64). */
  maxBatchSize?: number;
  /**
   * Used when a request leaves a sampling field out. Default: the model's `generation_config.json`
   * (`modelSamplingDefaults`; a checkpoint without one, or a `PolicyModel`, samples at temperature 1).
   */
  samplingDefaults?: SamplingDefaults;
  /**
   * Reuse the keys/values of prompt prefixes already prefilled (`PrefixCache`: blocks of 16 tokens, LRU
   * within 64 MiB by default), for models that implement `prefillAfter` (`PretrainedModel`); cleared when
   * the weights change. `false` turns it off.
   */
  prefixCache?: PrefixCacheOptions | false;
}

export class Generator implements GenerationEngine {
  private model: CausalLM;
  readonly tokenizer: TextTokenizer;
  readonly maxBatchSize: number;
  readonly samplingDefaults: SamplingDefaults;
  private readonly eosIds: ReadonlySet<number>;
  private queue: Seq[] = [];
  private active: Seq[] = [];
  /** Taken off the queue by `admit` and not yet running or finished: a failure must settle these too. */
  private admitting: Seq[] = [];
  private readonly cache = new BatchCache();
  private readonly prefixCache: PrefixCache | null;
  private running = false;
  private paused = false;
  private drainWaiters: Array<() => void> = [];
  private _version = 0;
  private _steps = 0;
  private nextGroup = 1;
  private readonly handOffs = new HandOffs();

  constructor(model: CausalLM, tokenizer: TextTokenizer, options: GeneratorOptions = {}) {
    this.model = model;
    this.tokenizer = tokenizer;
    this.eosIds = new Set(tokenizer.eosIds);
    this.maxBatchSize = options.maxBatchSize ?? 64;
    this.samplingDefaults = options.samplingDefaults ?? modelSamplingDefaults(model);
    this.prefixCache =
      options.prefixCache === false || !model.prefillAfter ? null : new PrefixCache(options.prefixCache);
  }

  /** Prefix-cache counters (null without a cache). */
  get prefixCacheStats(): PrefixCacheStats | null {
    return this.prefixCache?.getStats() ?? null;
  }

  /** Increments every time weights are swapped through `swapWeights`. */
  get version(): number {
    return this._version;
  }
  get activeCount(): number {
    return this.active.length;
  }
  get queuedCount(): number {
    return this.queue.length;
  }
  /** Decode steps run so far (each advances every active sequence by one token). */
  get steps(): number {
    return this._steps;
  }
  get policy(): CausalLM {
    return this.model;
  }
  get isPaused(): boolean {
    return this.paused;
  }

  generate(request: GenerateRequest): Promise<GenerateResult> {
    return this.enqueue(request, this.nextGroup++);
  }

  /**
   * Generate several sequences (e.g. the `n` choices of one request) admitted as one group: they start
   * together and never straddle a weight swap, so all results carry the same `modelVersion`.
   */
  generateMany(requests: readonly GenerateRequest[]): Promise<GenerateResult[]> {
    const group = this.nextGroup++;
    return Promise.all(requests.map((r) => this.enqueue(r, group)));
  }

  private enqueue(request: GenerateRequest, group: number): Promise<GenerateResult> {
    const invalid = requestError(this.model, request);
    if (invalid) return Promise.reject(invalid);
    const ctx = this.model.config.contextLength;
    const maxTokens = Math.min(request.maxTokens ?? ctx, this.samplingDefaults.maxTokens ?? ctx);
    return new Promise<GenerateResult>((resolve, reject) => {
      const decoder = new IncrementalDecoder(this.tokenizer);
      const seq = newSeq(request, group, maxTokens, decoder, resolve, reject);
      if (request.signal?.aborted) {
        seq.finish = "abort";
        this.complete(seq);
        return;
      }
      this.watchAbort(seq);
      this.queue.push(seq);
      this.kick();
    });
  }

  /** On abort, settle `seq` at once if it is queued here (a running row leaves after the current step). */
  private watchAbort(seq: Seq): void {
    watchAbort(seq, () => {
      const i = this.queue.indexOf(seq);
      if (i < 0) return;
      this.queue.splice(i, 1);
      this.complete(seq);
    });
  }

  /**
   * Stop admitting queued requests and resolve once every running sequence has finished. Queued and newly
   * arriving requests wait (nothing is dropped) until `resume()`.
   */
  pause(): Promise<void> {
    this.paused = true;
    if (this.active.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Resume admission; pass `weightsChanged` after updating the served model in place to bump `version`. */
  resume(options: { weightsChanged?: boolean } = {}): void {
    if (options.weightsChanged) {
      this._version++;
      this.prefixCache?.clear();
    }
    this.paused = false;
    this.kick();
  }

  /**
   * Swap weights between steps without dropping requests: pause (drain running sequences), run `apply`
   * (e.g. `policy.setWeightsFrom(trained)` or an optimizer step on the served model), bump the version,
   * resume. Every result is produced by exactly one version.
   */
  async swapWeights(apply?: CausalLM | ((model: CausalLM) => void | Promise<void>)): Promise<number> {
    await this.pause();
    try {
      if (typeof apply === "function") await apply(this.model);
      else if (apply) this.model.setWeightsFrom(apply);
      this._version++;
      this.prefixCache?.clear();
    } finally {
      this.resume();
    }
    return this._version;
  }

  /**
   * Partial rollouts: at the next step boundary (now when idle), take the running and queued sequences
   * `take` selects out of this generator, dropping their keys/values, and pass them to `to` — which hands
   * them to another generator's `adopt` to continue on its weights. Deferred because a caller may run
   * inside a step (a token callback), where the batch must not change.
   */
  handOff(take: (req: GenerateRequest) => boolean, to: (seqs: Seq[]) => void): void {
    this.handOffs.request(take, to);
    if (!this.running) this.runHandOffs();
  }

  /**
   * Continue sequences another generator handed off: each is prefilled again on these weights (prompt +
   * the tokens generated so far) and decodes on from there with its own sampler state; a group stays whole.
   */
  adopt(seqs: readonly Seq[]): void {
    renumberGroups(seqs, () => this.nextGroup++);
    for (const s of seqs) this.watchAbort(s);
    // They started before anything queued here: they go first.
    this.queue.unshift(...seqs);
    this.kick();
  }

  private runHandOffs(): void {
    const cache = this.cache;
    const left = this.handOffs.run({
      active: this.active,
      queue: this.queue,
      keepRows: (rows) => cache.keepRows(rows),
    });
    this.active = left.active;
    this.queue = left.queue;
    this.notifyDrained();
  }

  private kick(): void {
    if (this.running) return;
    if (this.active.length === 0 && (this.paused || this.queue.length === 0)) return;
    this.running = true;
    void this.loop();
  }

  private async loop(): Promise<void> {
    try {
      while (this.active.length > 0 || (!this.paused && this.queue.length > 0)) {
        try {
          this.runHandOffs();
          this.admit();
          if (this.active.length > 0) this.step();
        } catch (error) {
          this.failRunning(error);
        }
        this.notifyDrained();
        // Let HTTP handlers enqueue new requests between steps.
        await new Promise<void>((r) => setImmediate(r));
      }
    } finally {
      this.running = false;
      this.runHandOffs();
      this.notifyDrained();
    }
    if (this.active.length > 0 || (!this.paused && this.queue.length > 0)) this.kick();
  }

  /**
   * A decode step (or a callback inside it) failed: the batch cache is in an unknown state, so every
   * running sequence fails with the error. Queued requests are not part of it and are admitted next.
   */
  private failRunning(error: unknown): void {
    for (const s of [...this.active, ...this.admitting]) s.reject(error);
    this.active = [];
    this.admitting = [];
    this.cache.reset();
  }

  private notifyDrained(): void {
    if (this.active.length > 0 || this.drainWaiters.length === 0) return;
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }

  /**
   * Admit queued sequences up to the batch limit (a group is admitted whole) and prefill them
   * (`prefillPrompts`: equal-length prompts together, cached prefixes reused).
   */
  private admit(): void {
    const admitted: Seq[] = (this.admitting = []);
    let lastGroup = -1;
    while (this.queue.length > 0) {
      const sameGroup = (this.queue[0] as Seq).group === lastGroup;
      const full = this.active.length + admitted.length >= this.maxBatchSize;
      if (!sameGroup && (this.paused || full)) break;
      const seq = this.queue.shift() as Seq;
      lastGroup = seq.group;
      if (seq.finish) this.complete(seq);
      else admitted.push(seq);
    }
    if (admitted.length === 0) return;
    // Weights changed under the cache (an optimizer step, a worker's broadcast): its keys/values are stale.
    this.prefixCache?.validate(weightsStamp());
    // Rows of different adapters never share prefill work or cached keys/values: one call per adapter.
    for (const { adapter, seqs: part } of byAdapter(admitted)) {
      let groups: PrefilledGroup[];
      try {
        groups = prefillPrompts(this.model, part.map(prefillIds), this.prefixCache, adapter);
      } catch (error) {
        // Only these requests fail: the batch cache is untouched and the running rows go on.
        for (const s of part) s.reject(error);
        continue;
      }
      for (const [k, g] of groups.entries()) {
        try {
          this.join(
            g.members.map((i) => part[i] as Seq),
            g,
          );
        } catch (error) {
          for (const rest of groups.slice(k + 1)) for (const c of rest.cache) tf.dispose([c.k, c.v]);
          throw error;
        }
      }
    }
    this.admitting = [];
  }

  /**
   * Sample the first token of freshly prefilled sequences and add the unfinished ones to the batch (the
   * group's cache moves to the batch cache or is disposed).
   */
  private join(seqs: Seq[], { logits, cache, length }: PrefilledGroup): void {
    const V = this.model.config.vocabSize;
    try {
      seqs.forEach((seq, i) => {
        this.accept(seq, logits.subarray(i * V, (i + 1) * V));
      });
    } catch (error) {
      for (const c of cache) tf.dispose([c.k, c.v]);
      throw error;
    }
    const keep = seqs.flatMap((s, i) => (s.finish ? [] : [i]));
    for (const s of seqs) if (s.finish) this.complete(s);
    if (keep.length === 0) {
      for (const c of cache) tf.dispose([c.k, c.v]);
      return;
    }
    let rows = cache;
    if (keep.length < seqs.length) {
      rows = cache.map((c) => ({ k: gatherRows(c.k, keep), v: gatherRows(c.v, keep) }));
      for (const c of cache) tf.dispose([c.k, c.v]);
    }
    this.cache.addRows(rows, length);
    for (const i of keep) this.active.push(seqs[i] as Seq);
  }

  private step(): void {
    const bias = this.cache.stepBias();
    const { logits, cache } = this.model.decodeStep(
      this.active.map((s) => s.lastToken),
      this.active.map((s) => s.pos - 1),
      this.cache.current,
      bias,
      adapterRows(this.active),
    );
    bias.dispose();
    this.cache.advance(cache);
    this._steps++;
    const V = this.model.config.vocabSize;
    this.active.forEach((s, i) => {
      if (!s.finish) this.accept(s, logits.subarray(i * V, (i + 1) * V));
    });
    this.evictFinished();
  }

  /** Sample the next token of `seq` from its logits and decide whether it is finished. */
  private accept(seq: Seq, logits: Float32Array): void {
    const token = sampleNext(seq, logits, this.samplingDefaults);
    const textDelta = appendToken(seq, token, this.eosIds, this.model.config.contextLength);
    seq.req.onToken?.({ token, textDelta, modelVersion: this._version });
  }

  private evictFinished(): void {
    if (!this.active.some((s) => s.finish)) return;
    const keep: number[] = [];
    const done: Seq[] = [];
    this.active.forEach((s, i) => {
      if (s.finish) done.push(s);
      else keep.push(i);
    });
    this.cache.keepRows(keep);
    this.active = keep.map((i) => this.active[i] as Seq);
    for (const s of done) this.complete(s);
  }

  private complete(seq: Seq): void {
    settle(seq, this._version);
  }
}
