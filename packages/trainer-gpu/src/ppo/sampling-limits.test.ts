import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore, type Logger, rollout, silentLogger, Trainer } from "@agl/core";
import OpenAI from "openai";
import { afterAll, expect, it } from "vitest";
import { PolicyModel } from "../model/policy-model.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { PPO, type PPOResult } from "./algorithm.js";

/**
 * An agent that forwards no sampling parameters at all (the README's "unchanged agent") still gets the
 * trainer's: replies stop at `data.max_response_length`, validation is greedy (`val_kwargs.temperature`
 * 0), and validation reports progress at the default log level.
 */

const root = mkdtempSync(join(tmpdir(), "agl-ppo-limits-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Reply {
  mode: string;
  dataId: string;
  prompt: string;
  text: string;
  tokens: number;
  finish: string;
}

it("an unchanged agent gets the trainer's max_tokens and greedy validation", {
  timeout: 240_000,
}, async () => {
  const tokenizer = new Tokenizer({ chars: "ab" });
  const replies: Reply[] = [];
  const agent = rollout<{ prompt: string }>(async (task, { llm, rollout: r }) => {
    const client = new OpenAI({ baseURL: llm!.endpoint, apiKey: llm!.api_key ?? "none", maxRetries: 6 });
    // Nothing but the model and the messages: no max_tokens, temperature or seed.
    const res = await client.chat.completions.create({
      model: llm!.model,
      messages: [{ role: "user", content: task.prompt }],
    });
    const choice = res.choices[0]!;
    const text = choice.message.content ?? "";
    replies.push({
      mode: r.mode ?? "train",
      dataId: String((r.metadata as { data_id?: string }).data_id),
      prompt: task.prompt,
      text,
      tokens: res.usage!.completion_tokens,
      finish: choice.finish_reason,
    });
    return [...text].filter((ch) => ch === "a").length / Math.max(1, text.length);
  });
  const lines: string[] = [];
  const logger: Logger = { ...silentLogger, info: (m: string) => lines.push(m) };
  const tasks = Array.from({ length: 4 }, (_, i) => ({ prompt: i % 2 ? "ab" : "ba" }));
  const algorithm = new PPO<{ prompt: string }>({
    config: {
      data: { train_batch_size: 2, max_prompt_length: 24, max_response_length: 4 },
      actor_rollout_ref: {
        rollout: { n: 2, val_kwargs: { n: 2 } },
        actor: { ppo_mini_batch_size: 2, optim: { lr: 1e-2 } },
      },
      trainer: {
        total_training_steps: 1,
        save_freq: -1,
        test_freq: 100,
        val_before_train: true,
        default_local_dir: join(root, "run"),
        logger: ["jsonl"],
        seed: 3,
      },
      agentlightning: { poll_interval_seconds: 0.05 },
    },
    policy: {
      // A context of 200 tokens: without the limit an untrained model writes far past 4 tokens.
      model: PolicyModel.create({
        vocabSize: tokenizer.vocabSize,
        dModel: 16,
        nLayers: 1,
        nHeads: 2,
        contextLength: 200,
        seed: 3,
      }),
      tokenizer,
      template: new ChatTemplate(tokenizer),
    },
    handleSignals: false,
  });
  const store = new InMemoryLightningStore();
  const trainer = new Trainer({
    algorithm,
    store,
    runnerConcurrency: 2,
    pollIntervalMs: 5,
    gracePeriodMs: 100,
    logger,
  });
  await trainer.fit<{ prompt: string }, PPOResult>(agent, tasks, { valDataset: tasks });

  const train = replies.filter((r) => r.mode === "train");
  const val = replies.filter((r) => r.mode === "val");
  expect(train).toHaveLength(4);
  // Before training and after the last step.
  expect(val).toHaveLength(16);
  for (const r of replies) expect(r.tokens).toBeLessThanOrEqual(4);
  expect(replies.some((r) => r.tokens === 4 && r.finish === "length")).toBe(true);
  // Greedy: both repeats of a validation task, and every task with the same prompt, give the same text.
  for (const step of ["val-0-", "val-1-"]) {
    for (const prompt of ["ab", "ba"]) {
      const texts = val.filter((r) => r.dataId.startsWith(step) && r.prompt === prompt).map((r) => r.text);
      expect(texts).toHaveLength(4);
      expect(new Set(texts).size).toBe(1);
    }
  }
  // The calls as sent upstream carry the resource's values.
  const rollouts = (await store.queryRollouts({})).items;
  for (const ro of rollouts) {
    const spans = (await store.querySpans(ro.rollout_id)).items.filter(
      (s) => s.attributes["gen_ai.request.max_tokens"] !== undefined,
    );
    expect(spans.length).toBeGreaterThan(0);
    for (const s of spans) {
      expect(s.attributes["gen_ai.request.max_tokens"]).toBe(4);
      expect(s.attributes["gen_ai.request.temperature"]).toBe(ro.mode === "val" ? 0 : 1);
    }
  }
  expect(lines).toContain("PPO: validation at step 0: 8 rollouts");
  expect(lines.some((l) => /^PPO: validation at step 0: 8\/8 rollouts ended/.test(l))).toBe(true);
});
