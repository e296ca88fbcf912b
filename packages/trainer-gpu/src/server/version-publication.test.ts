import { describe, expect, it } from "vitest";
import { Generator } from "../generate/generator.js";
import { tinySetup } from "../test-support/tiny.js";
import { VersionedEngine } from "./version-publication.js";

/**
 * Publishing weights without a stop: a request that is generating when a new version is published
 * finishes on the weights it started with (token for token what those weights alone produce), while
 * requests arriving after the publication get the new weights; the old snapshot lives exactly as long
 * as its requests.
 */
describe("VersionedEngine", () => {
  it("in-flight requests finish on their version; new ones start on the published one", async () => {
    const { model, tokenizer, template } = await tinySetup(21);
    const { model: other } = await tinySetup(99);
    const promptIds = template.encodeChat([{ role: "user", content: "hi" }]).ids;
    const params = { promptIds, seed: 7, maxTokens: 16, ignoreEos: true, temperature: 1 };
    // References: each version's weights alone.
    const before = await new Generator(model.clone({ trainable: false }), tokenizer).generate(params);
    const after = await new Generator(other.clone({ trainable: false }), tokenizer).generate(params);
    expect(after.tokenIds).not.toEqual(before.tokenIds);

    const engine = new VersionedEngine(model, tokenizer);
    let tokens = 0;
    let late: Promise<unknown> | undefined;
    const first = engine.generateMany([
      {
        ...params,
        onToken: () => {
          // Mid-generation: the trainer changes the source in place and publishes it.
          if (++tokens !== 3) return;
          model.setWeightsFrom(other);
          expect(engine.publish()).toBe(1);
          expect(engine.liveVersions).toEqual([1, 0]);
          late = engine.generateMany([params]);
        },
      },
    ]);
    const [old] = await first;
    const [fresh] = (await late) as Awaited<typeof first>;
    expect(old!.modelVersion).toBe(0);
    expect(old!.tokenIds).toEqual(before.tokenIds);
    expect(fresh!.modelVersion).toBe(1);
    expect(fresh!.tokenIds).toEqual(after.tokenIds);
    // Version 0 retired once its request ended; its snapshot is reused for the next publication.
    expect(engine.liveVersions).toEqual([1]);
    expect(engine.version).toBe(1);
    expect(engine.publish()).toBe(2);
    const [third] = await engine.generateMany([params]);
    expect(third!.modelVersion).toBe(2);
    expect(third!.tokenIds).toEqual(after.tokenIds);
    engine.dispose();
    expect(model.isDisposed).toBe(false);
  });

  it("pause waits for requests on every live version; swapWeights updates the source and publishes", async () => {
    const { model, tokenizer, template } = await tinySetup(21);
    const { model: other } = await tinySetup(99);
    const promptIds = template.encodeChat([{ role: "user", content: "hi" }]).ids;
    const engine = new VersionedEngine(model, tokenizer);
    let paused: Promise<void> | undefined;
    let pausedResolved = false;
    const running = engine.generateMany([
      {
        promptIds,
        seed: 1,
        maxTokens: 12,
        ignoreEos: true,
        onToken: () => {
          if (paused) return;
          engine.publish();
          paused = engine.pause().then(() => {
            pausedResolved = true;
          });
        },
      },
    ]);
    const [r] = await running;
    await paused;
    expect(pausedResolved).toBe(true);
    expect(r!.tokenIds).toHaveLength(12);
    expect(engine.activeCount).toBe(0);
    engine.resume();
    expect(await engine.swapWeights(other)).toBe(2);
    const [next] = await engine.generateMany([{ promptIds, seed: 1, maxTokens: 4 }]);
    expect(next!.modelVersion).toBe(2);
    engine.dispose();
  });
});
