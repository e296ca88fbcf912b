import type { AttemptedRollout, Rollout } from "@agl/core";
import { describe, expect, it } from "vitest";
import { filterRows, rewardFromSpans, toRolloutRow } from "./rollout-rows.js";

const base = {
  rollout_id: "ro-1",
  input: {},
  start_time: 100,
  end_time: null,
  mode: "train",
  resources_id: "rs-1",
  status: "running",
  config: { timeout_seconds: null, unresponsive_seconds: null, max_attempts: 2, retry_condition: [] },
  metadata: { data_id: "d-7" },
} as Rollout;

describe("rollout rows", () => {
  it("takes attempts, worker and data id from the rollout; running rollouts count up to now", () => {
    const attempted = {
      ...base,
      attempt: {
        rollout_id: "ro-1",
        attempt_id: "at-2",
        sequence_id: 2,
        start_time: 101,
        status: "running",
        worker_id: "Worker-1",
      },
    } as AttemptedRollout;
    const row = toRolloutRow(attempted, 130);
    expect(row).toMatchObject({
      attempts: 2,
      workerId: "Worker-1",
      dataId: "d-7",
      durationSeconds: 30,
      mode: "train",
    });
    expect(toRolloutRow({ ...base, status: "succeeded", end_time: 112 }, 999).durationSeconds).toBe(12);
    // a terminal rollout without end_time has no duration rather than a growing one
    expect(toRolloutRow({ ...base, status: "failed" }, 999).durationSeconds).toBeNull();
    expect(toRolloutRow({ ...base, metadata: null, mode: null }, 100)).toMatchObject({
      dataId: null,
      mode: "–",
      attempts: 0,
    });
  });

  it("filters the page by mode and data id", () => {
    const rows = [
      toRolloutRow(base, 100),
      toRolloutRow({ ...base, rollout_id: "ro-2", mode: "val", metadata: { data_id: "d-8" } }, 100),
    ];
    expect(filterRows(rows, { mode: "val" }).map((r) => r.rolloutId)).toEqual(["ro-2"]);
    expect(filterRows(rows, { dataId: "d-7" }).map((r) => r.rolloutId)).toEqual(["ro-1"]);
    expect(filterRows(rows, {})).toHaveLength(2);
  });

  it("reads the last reward of the reward spans", () => {
    const reward = (v: number) => ({
      name: "agentlightning.annotation",
      attributes: { "agentlightning.reward.0.value": v },
    });
    expect(rewardFromSpans([reward(0.1), reward(0.9)] as never)).toBe(0.9);
    expect(rewardFromSpans([])).toBeNull();
  });
});
