import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { StalenessScheduler } from "./staleness-schedule.js";

/**
 * Runs a whole training run against the scheduler with rollouts finishing in an arbitrary order: the
 * trainer takes a batch when the scheduler gives one, else some admitted group finishes (the property's
 * choice). Returns what each step trained and the staleness of every trained group.
 */
function simulate(B: number, k: number, steps: number, picks: number[]) {
  const s = new StalenessScheduler(B, k, 0, steps * B);
  const admittedAt = new Map<number, number>();
  const unfinished: number[] = [];
  const batches: number[][] = [];
  const staleness: number[] = [];
  let version = 0;
  let p = 0;
  for (const g of s.admit(version)) {
    admittedAt.set(g, version);
    unfinished.push(g);
  }
  while (version < steps) {
    const batch = s.takeBatch(version + 1);
    if (batch) {
      expect(batch).toHaveLength(B);
      for (const g of batch) staleness.push(version - admittedAt.get(g)!);
      batches.push(batch);
      version++;
      for (const g of s.admit(version)) {
        admittedAt.set(g, version);
        unfinished.push(g);
      }
      continue;
    }
    // The step must wait: some group is still running (otherwise the scheduler deadlocked).
    expect(unfinished.length).toBeGreaterThan(0);
    const i = picks[p++ % picks.length]! % unfinished.length;
    s.finish(unfinished.splice(i, 1)[0]!);
  }
  return { batches, staleness, admittedAt };
}

describe("StalenessScheduler", () => {
  it("any completion order: every group trained exactly once, each step a full batch, staleness <= k", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.nat(1000), { minLength: 1, maxLength: 50 }),
        (B, k, steps, picks) => {
          const { batches, staleness } = simulate(B, k, steps, picks);
          expect(batches).toHaveLength(steps);
          expect(batches.flat().sort((a, b) => a - b)).toEqual(
            Array.from({ length: steps * B }, (_, i) => i),
          );
          expect(Math.max(...staleness)).toBeLessThanOrEqual(k);
          expect(Math.min(...staleness)).toBeGreaterThanOrEqual(0);
        },
      ),
      { numRuns: 400 },
    );
  });

  it("k = 0 is the synchronous loop: step s admits and trains exactly its own groups", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(fc.nat(1000), { minLength: 1 }), (B, picks) => {
        const { batches, staleness } = simulate(B, 0, 5, picks);
        batches.forEach((batch, s) => {
          expect(batch).toEqual(Array.from({ length: B }, (_, i) => s * B + i));
        });
        expect(staleness.every((x) => x === 0)).toBe(true);
      }),
    );
  });

  it("a group that always finishes last is still trained, at its deadline at the latest", () => {
    // k = 2, one group per step; group 0 finishes only when nothing else can run.
    const s = new StalenessScheduler(1, 2, 0, 6);
    expect(s.admit(0)).toEqual([0, 1, 2]);
    s.finish(1);
    expect(s.takeBatch(1)).toEqual([1]);
    expect(s.admit(1)).toEqual([3]);
    s.finish(3);
    // Training 3 now would leave 0 and 2 (deadline 3) for the single step 3: the step waits instead.
    expect(s.takeBatch(2)).toBeNull();
    s.finish(2);
    expect(s.takeBatch(2)).toEqual([2]);
    expect(s.admit(2)).toEqual([4]);
    s.finish(3 + 1);
    // Step 3 is group 0's deadline: it waits for it although groups 3 and 4 are ready.
    expect(s.takeBatch(3)).toBeNull();
    s.finish(0);
    expect(s.takeBatch(3)).toEqual([0]);
    expect(s.admit(3)).toEqual([5]);
    expect(s.takeBatch(4)).toEqual([3]);
  });

  it("admits nothing past the end of the run, and resumes at a later group", () => {
    const s = new StalenessScheduler(2, 1, 4, 8);
    expect(s.admit(2)).toEqual([4, 5, 6, 7]);
    expect(s.admit(3)).toEqual([]);
    expect(() => s.finish(0)).toThrow(/never admitted/);
  });
});
