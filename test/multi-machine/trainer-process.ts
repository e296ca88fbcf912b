// The trainer side of the multi-machine test, as a user would write it: connect to the store server by
// URL, train with PPO and no in-process runners (agl-worker processes elsewhere run the agent), and
// publish the LLM proxy at a URL other machines can reach. Prints the PPO result as one JSON line.
//
//   node --import tsx test/multi-machine/trainer-process.ts <storeUrl> <proxyPort> <proxyPublicUrl> <dir>
// The store token comes from $AGL_STORE_TOKEN, the proxy token secret from $AGL_PROXY_TOKEN_SECRET.

import { LightningStoreClient } from "@agl/client";
import { consoleLogger, Trainer } from "@agl/core";
import { ChatTemplate, PolicyModel, PPO, type PPOResult, selectBackend, Tokenizer } from "@agl/trainer-gpu";

const [storeUrl, proxyPort, publicUrl, dir] = process.argv.slice(2);
if (!storeUrl || !proxyPort || !publicUrl || !dir) {
  process.stderr.write("usage: trainer-process.ts <storeUrl> <proxyPort> <proxyPublicUrl> <dir>\n");
  process.exit(2);
}

await selectBackend({ backend: "wasm", log: () => {} });
const tokenizer = new Tokenizer({ chars: "ab" });
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
  template: new ChatTemplate(tokenizer),
};
const store = new LightningStoreClient({ url: storeUrl, token: process.env.AGL_STORE_TOKEN ?? null });
const algorithm = new PPO({
  policy,
  proxy: { host: "0.0.0.0", port: Number(proxyPort), publicUrl },
  handleSignals: false,
  config: {
    data: { train_batch_size: 2, max_prompt_length: 24, max_response_length: 4 },
    actor_rollout_ref: { rollout: { n: 3 }, actor: { ppo_mini_batch_size: 2, optim: { lr: 1e-2 } } },
    trainer: {
      total_training_steps: 2,
      test_freq: 100,
      val_before_train: false,
      default_local_dir: dir,
      logger: ["jsonl"],
      seed: 3,
    },
    agentlightning: { poll_interval_seconds: 0.1 },
  },
});
const trainer = new Trainer({ algorithm, store, nRunners: 0, logger: consoleLogger("warn") });
const tasks = Array.from({ length: 4 }, (_, i) => ({ prompt: i % 2 ? "a" : "b" }));
const { result } = await trainer.fit<{ prompt: string }, PPOResult>(null, tasks);
await store.close();
process.stdout.write(
  `${JSON.stringify({ stepsCompleted: result.stepsCompleted, aborted: result.aborted })}\n`,
  () => process.exit(0),
);
