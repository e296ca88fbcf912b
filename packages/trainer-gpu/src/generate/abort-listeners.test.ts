import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { tinySetup } from "../test-support/tiny.js";
import { Generator } from "./generator.js";

/**
 * A request's abort listener lives exactly as long as the request: a client that reuses one signal for
 * many requests (a session-wide AbortController) must not accumulate a listener per finished request, and
 * a sequence handed to another generator is watched by that generator alone.
 */
describe("Generator abort listeners", () => {
  it("are removed when a request settles (finished, rejected or aborted)", async () => {
    const { model, tokenizer } = await tinySetup(5);
    const gen = new Generator(model, tokenizer);
    const session = new AbortController();
    const listeners = () => getEventListeners(session.signal, "abort").length;
    for (let i = 0; i < 3; i++) {
      let during = -1;
      const r = await gen.generate({
        promptIds: [1, 2, 3],
        maxTokens: 4,
        ignoreEos: true,
        seed: i,
        signal: session.signal,
        onToken: () => {
          during = listeners();
        },
      });
      expect(r.tokenIds).toHaveLength(4);
      expect(during).toBe(1);
      expect(listeners()).toBe(0);
    }
    // An invalid request is rejected before it is watched.
    await expect(gen.generate({ promptIds: [], signal: session.signal })).rejects.toThrow(/empty/);
    expect(listeners()).toBe(0);
    // Aborting a queued request settles it and drops its listener.
    await gen.pause();
    const own = new AbortController();
    const queued = gen.generate({ promptIds: [1, 2], maxTokens: 4, signal: own.signal });
    expect(getEventListeners(own.signal, "abort")).toHaveLength(1);
    own.abort();
    expect((await queued).finishReason).toBe("abort");
    expect(getEventListeners(own.signal, "abort")).toHaveLength(0);
    gen.resume();
    model.dispose();
  });

  it("a handed-off sequence is watched by the generator that adopted it", async () => {
    const { model, tokenizer } = await tinySetup(6);
    const from = new Generator(model, tokenizer);
    const to = new Generator(model, tokenizer);
    await from.pause();
    await to.pause();
    const ctrl = new AbortController();
    const pending = from.generate({
      promptIds: [4, 5, 6],
      maxTokens: 8,
      ignoreEos: true,
      signal: ctrl.signal,
    });
    from.handOff(
      () => true,
      (seqs) => to.adopt(seqs),
    );
    expect([from.queuedCount, to.queuedCount]).toEqual([0, 1]);
    expect(getEventListeners(ctrl.signal, "abort")).toHaveLength(1);
    // Queued on a paused generator: the abort settles it at once, without waiting for a resume.
    ctrl.abort();
    const r = await pending;
    expect([r.finishReason, r.tokenIds]).toEqual(["abort", []]);
    expect(to.queuedCount).toBe(0);
    expect(getEventListeners(ctrl.signal, "abort")).toHaveLength(0);
    model.dispose();
  });
});
