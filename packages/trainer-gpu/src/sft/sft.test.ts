import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import * as tf from "@tensorflow/tfjs";
import { afterAll, describe, expect, it } from "vitest";
import { tinySetup, toolTranscript } from "../test-support/tiny.js";
import { maskedNll, sft } from "./sft.js";

const greetings = ["hi", "hello", "hey", "yo"].map((w, i) => ({
  messages: [
    { role: "system" as const, content: "Reply with the word backwards." },
    { role: "user" as const, content: w },
    { role: "assistant" as const, content: [...w].reverse().join("") + (i % 2 ? "!" : ".") },
  ],
}));

describe("sft", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("drives the masked loss down on a toy conversation set (JSONL input)", async () => {
    const { model, template } = await tinySetup(11, 96);
    const dir = await mkdtemp(join(tmpdir(), "agl-sft-"));
    dirs.push(dir);
    const path = join(dir, "data.jsonl");
    const data = [...greetings, toolTranscript(1, 2), toolTranscript(4, 4)];
    await writeFile(path, data.map((d) => JSON.stringify(d)).join("\n"));
    const result = await sft(model, path, {
      template,
      steps: 120,
      batchSize: 6,
      learningRate: 1e-2,
      progress: false,
    });
    expect(result.losses).toHaveLength(120);
    const first = result.losses[0] as number;
    const lastMean = result.losses.slice(-10).reduce((a, b) => a + b, 0) / 10;
    // Initial loss is ~ln(108) = 4.7 nats; memorising 6 short transcripts must get far below.
    expect(first).toBeGreaterThan(4);
    expect(lastMean).toBeLessThan(0.5);
    expect(result.trainedTokens).toBeGreaterThan(0);
    model.dispose();
  });

  it("draws a progress bar with steps, loss and throughput when progress is on (non-TTY stream)", async () => {
    const { model, template } = await tinySetup(13, 96);
    const chunks: string[] = [];
    const stream = Object.assign(
      new Writable({
        write(chunk: Buffer, _enc, done) {
          chunks.push(chunk.toString());
          done();
        },
      }),
      { isTTY: false },
    );
    const run = (progress?: boolean) =>
      sft(model, greetings, { template, steps: 3, batchSize: 2, progress, progressStream: stream });
    await run(true);
    const out = chunks.join("");
    expect(out).toMatch(/sft \[[^\]]*\] 0\/3 steps \| loss - \| - tok\/s/);
    const last = out.trim().split("\n").at(-1) ?? "";
    expect(last).toMatch(/^sft \[[^\]]*\] 3\/3 steps \| loss \d+\.\d{4} \| \d+ tok\/s \| eta /);
    // Off by default when the stream is not a terminal.
    chunks.length = 0;
    await run(undefined);
    expect(chunks).toEqual([]);
    model.dispose();
  });

  it("only assistant tokens carry loss", async () => {
    const { model, template } = await tinySetup(12, 96);
    const e = template.encodeChat(greetings[0]!.messages, null, { addGenerationPrompt: false });
    // Changing a non-assistant target's mask to 0 vs 1 changes the loss; the default mask ignores user text.
    const onlyAssistant = tf.tidy(() => maskedNll(model, [e.ids], [e.assistantMask]).dataSync()[0] as number);
    const everything = tf.tidy(() => maskedNll(model, [e.ids], [e.ids.map(() => 1)]).dataSync()[0] as number);
    expect(onlyAssistant).not.toBeCloseTo(everything, 4);
    const assistantText = e.ids.filter((_, i) => e.assistantMask[i] === 1);
    expect(template.tokenizer.decode(assistantText)).toBe("ih.<eos>");
    model.dispose();
  });
});
