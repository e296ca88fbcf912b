import * as tf from "@tensorflow/tfjs";
import { describe, expect, it } from "vitest";
import { BACKEND_ORDER, parseBackendName, selectBackend } from "./select.js";

describe("selectBackend", () => {
  it("forces a backend by option and logs why", async () => {
    const lines: string[] = [];
    const sel = await selectBackend({ backend: "cpu", log: (l) => lines.push(l) });
    expect(sel).toEqual({ backend: "cpu", skipped: [], forced: true });
    expect(tf.getBackend()).toBe("cpu");
    expect(lines).toEqual(["[agl] tfjs backend: cpu (forced by option)"]);
  });

  it("otherwise picks the first loadable backend and names every faster one it skipped", async () => {
    const lines: string[] = [];
    const sel = await selectBackend({ log: (l) => lines.push(l) });
    const rank = BACKEND_ORDER.indexOf(sel.backend);
    expect(sel.skipped.map((s) => s.backend)).toEqual(BACKEND_ORDER.slice(0, rank));
    expect(tf.getBackend()).toBe(sel.backend);
    expect(lines).toHaveLength(1);
    for (const s of sel.skipped) expect(lines[0]).toContain(`${s.backend}: ${s.reason}`);
    // Gradients are registered (tfjs-core's Node entry alone registers none).
    const g = tf.grad((x: tf.Tensor) => tf.sum(tf.square(x)))(tf.tensor1d([1, 2]));
    expect(Array.from(g.dataSync())).toEqual([2, 4]);
  });

  it("rejects unknown names", () => {
    expect(parseBackendName("GPU")).toBe("tensorflow-gpu");
    expect(() => parseBackendName("metal")).toThrow(/Unknown TensorFlow.js backend "metal"/);
  });
});
