import { describe, expect, it } from "vitest";
import { InvalidArgumentError, StoreClosedError } from "../../errors.js";
import type { AttemptedRollout } from "../../types/rollout.js";
import type { StoreFactory } from "../helpers.js";
import { expectError, makeSpan, withStore } from "../helpers.js";

export function miscTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));

  describe("validation, copies, statistics, close", () => {
    test("bad input raises InvalidArgumentError naming the field", async (store) => {
      const field = async (p: Promise<unknown>) =>
        (await expectError<InvalidArgumentError>(p, InvalidArgumentError)).field;
      expect(await field(store.enqueueRollout({ input: 1, config: { max_attempts: 0 } }))).toContain(
        "max_attempts",
      );
      expect(await field(store.enqueueRollout({ input: 1, mode: "bogus" as any }))).toContain("mode");
      expect(
        await field(
          store.enqueueManyRollouts([
            { input: 1 },
            { input: 2, config: { retry_condition: ["nope" as any] } },
          ]),
        ),
      ).toContain("retry_condition");
      expect((await store.queryRollouts()).total).toBe(0);
      const r = await store.startRollout({ input: 1 });
      expect(await field(store.updateAttempt(r.rollout_id, "latest", { status: "done" as any }))).toContain(
        "status",
      );
      expect(await field(store.updateRollout(r.rollout_id, { status: "finished" as any }))).toContain(
        "status",
      );
      expect(
        await field(
          store.addResources({ x: { resource_type: "llm", endpoint: "http://h", model: "" } } as any),
        ),
      ).toContain("model");
      expect(await field(store.dequeueManyRollouts({ limit: 1.5 }))).toContain("limit");
    });

    test("callers cannot mutate store state through inputs or returned objects", async (store) => {
      const input = { nested: { value: 1 } };
      const metadata = { tag: "a" };
      const r = (await store.startRollout({ input, metadata })) as AttemptedRollout;
      input.nested.value = 2;
      metadata.tag = "b";
      (r.input as any).nested.value = 3;
      r.attempt.status = "succeeded";
      r.config.max_attempts = 99;
      const stored = (await store.getRolloutById(r.rollout_id)) as AttemptedRollout;
      expect(stored.input).toEqual({ nested: { value: 1 } });
      expect(stored.metadata).toEqual({ tag: "a" });
      expect(stored.attempt.status).toBe("preparing");
      expect(stored.config.max_attempts).toBe(1);
      const span = makeSpan(r.attempt, 1, { attributes: { k: "v" } });
      const added = await store.addSpan(span);
      (span.attributes as any).k = "changed";
      (added!.attributes as any).k = "changed";
      expect((await store.querySpans(r.rollout_id)).items[0]!.attributes).toEqual({ k: "v" });
    });

    test("statistics counts everything", async (store) => {
      const empty = await store.statistics();
      expect(empty).toMatchObject({
        total_rollouts: 0,
        total_attempts: 0,
        total_spans: 0,
        total_resources: 0,
      });
      expect(typeof empty.name).toBe("string");
      const r = await store.startRollout({ input: 1, worker_id: "w-s" });
      await store.startAttempt(r.rollout_id);
      await store.enqueueRollout({ input: 2 });
      await store.addSpan(makeSpan(r.attempt, 1));
      await store.addResources({
        p: { resource_type: "prompt_template", template: "t", engine: "f-string" },
      });
      const stats = await store.statistics();
      expect(stats).toMatchObject({
        total_rollouts: 2,
        total_attempts: 2,
        total_spans: 1,
        total_resources: 1,
        total_workers: 1,
      });
      expect(stats.uptime).toBeGreaterThanOrEqual(0);
    });

    test("capabilities are declared", async (store) => {
      for (const key of ["thread_safe", "async_safe", "zero_copy", "otlp_traces"] as const) {
        expect(typeof store.capabilities[key]).toBe("boolean");
      }
    });

    test("close is idempotent and later calls raise StoreClosedError", async (store) => {
      await store.enqueueRollout({ input: 1 });
      await store.close();
      await store.close();
      await expectError(store.enqueueRollout({ input: 2 }), StoreClosedError);
      await expectError(store.dequeueRollout(), StoreClosedError);
      await expectError(store.queryRollouts(), StoreClosedError);
    });
  });
}
