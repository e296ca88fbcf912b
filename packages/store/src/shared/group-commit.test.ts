import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GroupCommit, type Settled } from "./group-commit.js";

/** A writer whose batches the test finishes by hand, recording what each batch held. */
function manualWriter<J>() {
  const batches: J[][] = [];
  const finishers: Array<(results: Array<Settled<J>> | Error) => void> = [];
  const write = (jobs: J[]) =>
    new Promise<Array<Settled<J>>>((resolve, reject) => {
      batches.push(jobs);
      finishers.push((r) => (r instanceof Error ? reject(r) : resolve(r)));
    });
  const echo = (i: number) => finishers[i]!(batches[i]!.map((j) => ({ ok: true, value: j })));
  return { batches, finishers, write, echo };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("GroupCommit", () => {
  it("runs a lone call at once, and gathers calls made meanwhile into the next batch", async () => {
    const w = manualWriter<number>();
    const gc = new GroupCommit<number, number>(w.write);
    const first = gc.submit(1);
    expect(w.batches).toEqual([[1]]);
    const rest = [2, 3, 4].map((j) => gc.submit(j));
    expect(w.batches).toHaveLength(1);
    expect(gc.waiting).toBe(3);
    w.echo(0);
    expect(await first).toBe(1);
    await tick();
    expect(w.batches[1]).toEqual([2, 3, 4]);
    w.echo(1);
    expect(await Promise.all(rest)).toEqual([2, 3, 4]);
  });

  it("a call's own error fails only that call", async () => {
    const w = manualWriter<number>();
    const gc = new GroupCommit<number, number>(w.write);
    const calls = [gc.submit(0), gc.submit(1), gc.submit(2)];
    w.echo(0);
    await tick();
    w.finishers[1]!([
      { ok: true, value: 1 },
      { ok: false, error: new Error("two is bad") },
    ]);
    const settled = await Promise.allSettled(calls);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
    expect((settled[2] as PromiseRejectedResult).reason.message).toBe("two is bad");
  });

  it("when a whole batch fails, each call is retried alone and only the culprit fails", async () => {
    const seen: number[][] = [];
    const gc = new GroupCommit<number, number>(async (jobs) => {
      seen.push(jobs);
      if (jobs.includes(13)) throw new Error("batch aborted by 13");
      return jobs.map((j) => ({ ok: true, value: j * 2 }));
    });
    const blocker = gc.submit(0);
    const calls = [11, 12, 13, 14].map((j) => gc.submit(j));
    await blocker;
    const settled = await Promise.allSettled(calls);
    expect(settled.map((s) => (s.status === "fulfilled" ? s.value : "failed"))).toEqual([
      22,
      24,
      "failed",
      28,
    ]);
    expect(seen[1]).toEqual([11, 12, 13, 14]);
    expect(seen.slice(2).every((b) => b.length === 1)).toBe(true);
  });

  it("respects maxBatch and maxInFlight", async () => {
    const w = manualWriter<number>();
    const gc = new GroupCommit<number, number>(w.write, { maxBatch: 2, maxInFlight: 2 });
    const calls = Array.from({ length: 7 }, (_, j) => gc.submit(j));
    // Two slots: the first two calls start alone, the rest wait in batches of two.
    expect(w.batches).toEqual([[0], [1]]);
    w.echo(0);
    await tick();
    expect(w.batches[2]).toEqual([2, 3]);
    w.echo(1);
    await tick();
    expect(w.batches[3]).toEqual([4, 5]);
    w.echo(2);
    await tick();
    expect(w.batches[4]).toEqual([6]);
    w.echo(3);
    w.echo(4);
    expect(await Promise.all(calls)).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it("property: every call settles once with its own result; calls of one key never share a batch and keep their order", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ key: fc.integer({ min: 0, max: 3 }), fail: fc.boolean() }), { maxLength: 40 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 8 }),
        async (jobs, maxInFlight, maxBatch) => {
          const batches: number[][] = [];
          const order: number[] = [];
          const gc = new GroupCommit<number, number>(
            async (ids) => {
              batches.push(ids);
              await tick();
              order.push(...ids);
              return ids.map((id) =>
                jobs[id]!.fail ? { ok: false, error: new Error(`job ${id}`) } : { ok: true, value: id },
              );
            },
            { maxInFlight, maxBatch, key: (id) => String(jobs[id]!.key) },
          );
          const settled = await Promise.allSettled(jobs.map((_, id) => gc.submit(id)));
          settled.forEach((s, id) => {
            if (jobs[id]!.fail) expect(s.status).toBe("rejected");
            else expect(s).toEqual({ status: "fulfilled", value: id });
          });
          expect(order.slice().sort((a, b) => a - b)).toEqual(jobs.map((_, id) => id));
          for (const b of batches) {
            expect(b.length).toBeLessThanOrEqual(maxBatch);
            expect(new Set(b.map((id) => jobs[id]!.key)).size).toBe(b.length);
          }
          // Per key, batches started in submission order.
          const started = batches.flat();
          for (let k = 0; k < 4; k++) {
            const ofKey = started.filter((id) => jobs[id]!.key === k);
            expect(ofKey).toEqual([...ofKey].sort((a, b) => a - b));
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});
