// Test-only: a PPO run small enough to take a second per step on the CPU backend, whose agent can be
// told to hang from a given step on (so a test can interrupt training mid-collection).
import { InMemoryLightningStore, type Logger, rollout, Trainer } from "@agl/core";
import OpenAI from "openai";
import { PolicyModel } from "../../model/policy-model.js";
import { ChatTemplate } from "../../tokenizer/chat-template.js";
import { Tokenizer } from "../../tokenizer/tokenizer.js";
import { PPO, type PPOResult } from "../algorithm.js";
import type { PPOConfigInput } from "../config.js";
import type { ServeFn } from "../serving.js";

export type TinyTask = { prompt: string };

export interface TinyRunOptions {
  dir: string;
  steps: number;
  saveFreq?: number;
  /** Agents of this step (and later) wait for their abort signal instead of answering. */
  hangFromStep?: number;
  /** Called once, when the first hanging agent has started. */
  onHang?: () => void;
  handleSignals?: boolean;
  signal?: AbortSignal;
  logger: Logger;
  /** Merged over the base config's actor section. */
  actor?: Record<string, unknown>;
  /** Extra top-level `actor_rollout_ref` keys (e.g. VERL's `model` section). */
  actorRolloutRef?: Record<string, unknown>;
  onStep?: (step: number) => void;
  /** Merged over the base config's rollout section (e.g. `max_staleness`). */
  rollout?: Record<string, unknown>;
  /** PPOOptions.loop. */
  loop?: "sync" | "async";
  /** PPOOptions.serve (default: the in-process server). */
  serve?: ServeFn;
  runnerConcurrency?: number;
  /** Runs when a (non-hanging) agent starts. */
  beforeCall?: (info: { sampleIndex: number; step: number; signal: AbortSignal }) => void;
  /** Runs in the agent after its LLM call, before it returns (simulated tool latency). */
  afterCall?: (info: { sampleIndex: number; step: number; signal: AbortSignal }) => Promise<void>;
}

export interface TinyRun {
  result: PPOResult;
  store: InMemoryLightningStore;
}

const tokenizer = new Tokenizer({ chars: "ab" });
const template = new ChatTemplate(tokenizer);
const tasks: TinyTask[] = Array.from({ length: 4 }, (_, i) => ({ prompt: i % 2 ? "a" : "b" }));

export async function tinyRun(o: TinyRunOptions): Promise<TinyRun> {
  let hung = false;
  const agent = rollout<TinyTask>(async (task, { llm, rollout: r, signal }) => {
    const meta = r.metadata as { seed: number; data_id: string };
    const step = Number(/^train-(\d+)-/.exec(meta.data_id)?.[1] ?? 0);
    if (o.hangFromStep !== undefined && step >= o.hangFromStep) {
      if (!hung) {
        hung = true;
        o.onHang?.();
      }
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      throw new Error("stopped by the runner");
    }
    const sampleIndex = (r.metadata as { sample_index: number }).sample_index;
    o.beforeCall?.({ sampleIndex, step, signal });
    const client = new OpenAI({ baseURL: llm!.endpoint, apiKey: llm!.api_key ?? "none", maxRetries: 6 });
    const res = await client.chat.completions.create({
      model: llm!.model,
      messages: [{ role: "user", content: task.prompt }],
      max_tokens: 3,
      seed: meta.seed,
    });
    const text = res.choices[0]!.message.content ?? "";
    await o.afterCall?.({ sampleIndex, step, signal });
    return [...text].filter((ch) => ch === "a").length / 3;
  });
  const config: PPOConfigInput = {
    data: { train_batch_size: 2, max_prompt_length: 24, max_response_length: 4 },
    actor_rollout_ref: {
      ...o.actorRolloutRef,
      rollout: { n: 2, ...o.rollout },
      actor: { ppo_mini_batch_size: 2, optim: { lr: 1e-2 }, ...o.actor },
    },
    trainer: {
      total_training_steps: o.steps,
      save_freq: o.saveFreq ?? -1,
      test_freq: 100,
      val_before_train: false,
      default_local_dir: o.dir,
      logger: ["jsonl"],
      seed: 3,
    },
    agentlightning: { poll_interval_seconds: 0.05 },
  };
  const policy = {
    model: PolicyModel.create({
      vocabSize: tokenizer.vocabSize,
      dModel: 16,
      nLayers: 1,
      nHeads: 2,
      contextLength: 32,
      seed: 3,
    }),
    tokenizer,
    template,
  };
  const store = new InMemoryLightningStore();
  const algorithm = new PPO<TinyTask>({
    config,
    policy,
    handleSignals: o.handleSignals ?? false,
    onStep: o.onStep,
    loop: o.loop,
    ...(o.serve ? { serve: o.serve } : {}),
  });
  const trainer = new Trainer({
    algorithm,
    store,
    runnerConcurrency: o.runnerConcurrency ?? 2,
    pollIntervalMs: 5,
    gracePeriodMs: 100,
    logger: o.logger,
  });
  const { result } = await trainer.fit<TinyTask, PPOResult>(agent, tasks, { signal: o.signal });
  return { result, store };
}

/** Status of every rollout of training step `step`, from the store. */
export async function stepStatuses(store: InMemoryLightningStore, step: number): Promise<string[]> {
  const all = (await store.queryRollouts({})).items;
  return all
    .filter((r) => String((r.metadata as { data_id?: string }).data_id).startsWith(`train-${step}-`))
    .map((r) => r.status);
}
