import { describe, expect, it } from "vitest";
import { chartOrder, parseMetricsLog } from "./metrics.js";

describe("parseMetricsLog", () => {
  it("turns JSON lines into per-metric series in step order, skipping gaps and reporting bad lines", () => {
    const text = [
      '{"step":2,"training/reward":0.5,"actor/pg_loss":-0.1}',
      '{"step":0,"val/reward":0.05}',
      "not json",
      '{"no_step":1}',
      "",
      '{"step":1,"training/reward":0.25,"note":"text is ignored","nan":null}',
    ].join("\n");
    const log = parseMetricsLog(text);
    expect(log.badLines).toEqual([3, 4]);
    expect(log.series.get("training/reward")).toEqual({
      key: "training/reward",
      steps: [1, 2],
      values: [0.25, 0.5],
    });
    expect(log.series.get("val/reward")!.steps).toEqual([0]);
    expect(log.series.has("note")).toBe(false);
    expect(log.series.has("nan")).toBe(false);
  });

  it("puts reward and validation curves first", () => {
    expect(chartOrder(["timing_s/step", "actor/pg_loss", "val/accuracy", "training/reward"])).toEqual([
      "training/reward",
      "val/accuracy",
      "actor/pg_loss",
      "timing_s/step",
    ]);
  });
});
