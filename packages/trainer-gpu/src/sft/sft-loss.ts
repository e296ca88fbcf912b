import * as tf from "@tensorflow/tfjs-core";
import type { CausalLM } from "../model/causal-lm.js";
import type { ChatEncoder } from "../tokenizer/text-tokenizer.js";
import { encodeExample, type RawSftExample, summarizeSkips } from "./examples.js";
import { maskedNll, type SftExample } from "./sft.js";

/**
 * Held-out SFT loss: the mean masked cross-entropy (nats per assistant token) of `data` under `model`,
 * scored exactly as `sft()` trains (same template rendering, same truncation to the context), without
 * gradients. For validation curves and early stopping on demonstrations the model never trained on.
 */
export function sftLoss(
  model: CausalLM,
  data: readonly (SftExample | RawSftExample)[],
  options: { template: ChatEncoder; batchSize?: number },
): { loss: number; tokens: number; skipped: number } {
  const ctx = model.config.contextLength;
  const rows: Array<{ ids: number[]; mask: number[] }> = [];
  const skips: Array<{ reason: string }> = [];
  data.forEach((ex, index) => {
    const r = encodeExample(options.template, ex, index);
    if (!r.ok) skips.push(r);
    else rows.push({ ids: r.encoded.ids.slice(0, ctx), mask: r.encoded.assistantMask.slice(0, ctx) });
  });
  if (rows.length === 0) throw new Error(`sftLoss: no usable example (${summarizeSkips(skips)})`);
  const batchSize = Math.max(1, options.batchSize ?? 64);
  let sum = 0;
  let tokens = 0;
  for (let i = 0; i < rows.length; i += batchSize) {
    const batch = rows.slice(i, i + batchSize);
    const T = Math.max(...batch.map((b) => b.ids.length));
    const ids = batch.map((b) => [...b.ids, ...new Array<number>(T - b.ids.length).fill(0)]);
    const mask = batch.map((b) => [...b.mask, ...new Array<number>(T - b.mask.length).fill(0)]);
    const n = mask.reduce((a, r) => a + r.slice(1).reduce((x, y) => x + y, 0), 0);
    const mean = tf.tidy(() => maskedNll(model, ids, mask).dataSync()[0]!);
    sum += mean * n;
    tokens += n;
  }
  return { loss: tokens > 0 ? sum / tokens : 0, tokens, skipped: skips.length };
}
