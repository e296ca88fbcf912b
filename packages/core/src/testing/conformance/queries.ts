import { describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../../errors.js";
import type { LightningStore, RolloutQuery } from "../../store/store.js";
import type { Rollout } from "../../types/rollout.js";
import type { StoreFactory } from "../helpers.js";
import { attemptOf, expectError, sleep, withStore } from "../helpers.js";

/** Four rollouts in distinct states, created in order a, b, c, d. */
async function seed(store: LightningStore): Promise<Record<"a" | "b" | "c" | "d", Rollout>> {
  const a = await store.enqueueRollout({ input: "a", mode: "train" });
  await sleep(5);
  const b = await store.enqueueRollout({ input: "b", mode: "val" });
  await sleep(5);
  const c = await store.enqueueRollout({ input: "c" });
  await sleep(5);
  const d = await store.enqueueRollout({ input: "d", mode: "test" });
  await store.dequeueRollout(); // a → preparing
  await store.dequeueRollout(); // b → preparing
  await store.updateAttempt(b.rollout_id, "latest", { status: "succeeded" }); // b → succeeded
  await sleep(5);
  await store.updateRollout(d.rollout_id, { status: "cancelled" }); // d → cancelled
  return { a, b, c, d };
}

export function queryTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));
  const ids = (page: { items: Array<{ rollout_id: string }> }) => page.items.map((r) => r.rollout_id);

  describe("queries", () => {
    test("queryRollouts filters with and/or and items carry their latest attempt", async (store) => {
      const { a, b, c, d } = await seed(store);
      const all = await store.queryRollouts();
      expect(ids(all)).toEqual([a, b, c, d].map((r) => r.rollout_id));
      expect(all).toMatchObject({ limit: -1, offset: 0, total: 4 });
      expect(attemptOf(all.items[0]).status).toBe("preparing");
      expect("attempt" in all.items[2]! && all.items[2].attempt != null).toBe(false);

      expect(ids(await store.queryRollouts({ statusIn: ["succeeded", "cancelled"] }))).toEqual([
        b.rollout_id,
        d.rollout_id,
      ]);
      expect(ids(await store.queryRollouts({ rolloutIdIn: [c.rollout_id, a.rollout_id] }))).toEqual([
        a.rollout_id,
        c.rollout_id,
      ]);
      expect(ids(await store.queryRollouts({ rolloutIdContains: c.rollout_id.slice(3, 10) }))).toEqual([
        c.rollout_id,
      ]);
      const and = await store.queryRollouts({ statusIn: ["queuing"], rolloutIdIn: [a.rollout_id] });
      expect(and.total).toBe(0);
      const or = await store.queryRollouts({
        statusIn: ["queuing"],
        rolloutIdIn: [a.rollout_id],
        filterLogic: "or",
      });
      expect(ids(or)).toEqual([a.rollout_id, c.rollout_id]);
      // An explicit empty list matches nothing.
      expect((await store.queryRollouts({ statusIn: [] })).total).toBe(0);
    });

    test("agl-ts extension: modeIn / dataIdIn / dataIdContains filter, page and count the whole store", async (store) => {
      const r1 = await store.enqueueRollout({ input: 1, mode: "train", metadata: { data_id: "task-1" } });
      await sleep(5);
      const r2 = await store.enqueueRollout({ input: 2, mode: "val", metadata: { data_id: "task-12" } });
      await sleep(5);
      // A number, another key and no metadata never match a data-id filter.
      const r3 = await store.enqueueRollout({ input: 3, mode: "val", metadata: { data_id: 12 } });
      await sleep(5);
      const r4 = await store.enqueueRollout({ input: 4 });
      await sleep(5);
      const r5 = await store.enqueueRollout({
        input: 5,
        mode: "test",
        metadata: { dataId: "task-1", x: "a%_'b" },
      });
      const q = async (query: Parameters<LightningStore["queryRollouts"]>[0]) =>
        ids(await store.queryRollouts(query));

      expect(await q({ modeIn: ["val"] })).toEqual([r2, r3].map((r) => r.rollout_id));
      expect(await q({ modeIn: ["train", "test"] })).toEqual([r1, r5].map((r) => r.rollout_id));
      expect(await q({ modeIn: [] })).toEqual([]);
      expect(await q({ dataIdIn: ["task-1"] })).toEqual([r1.rollout_id]);
      expect(await q({ dataIdIn: ["12", "task-12"] })).toEqual([r2.rollout_id]);
      expect(await q({ dataIdContains: "task-1" })).toEqual([r1, r2].map((r) => r.rollout_id));
      expect(await q({ dataIdContains: "" })).toEqual([r1, r2].map((r) => r.rollout_id));
      expect(await q({ dataIdContains: "TASK" })).toEqual([]);
      // Combined with the other filters (and by default, or on request), sorting and paging.
      const newestTask: RolloutQuery = {
        modeIn: ["train", "val"],
        dataIdContains: "task",
        sortBy: "start_time",
      };
      const page = await store.queryRollouts({ ...newestTask, sortOrder: "desc", limit: 1 });
      expect(ids(page)).toEqual([r2.rollout_id]);
      expect(page.total).toBe(2);
      const second = await store.queryRollouts({ ...newestTask, sortOrder: "desc", limit: 1, offset: 1 });
      expect(ids(second)).toEqual([r1.rollout_id]);
      expect(second.total).toBe(2);
      expect(await q({ modeIn: ["test"], dataIdIn: ["task-12"], filterLogic: "or" })).toEqual(
        [r2, r5].map((r) => r.rollout_id),
      );
      expect(
        await q({ statusIn: ["queuing"], modeIn: ["val"], rolloutIdIn: [r3.rollout_id, r4.rollout_id] }),
      ).toEqual([r3.rollout_id]);
      const field = async (p: Promise<unknown>) =>
        (await expectError<InvalidArgumentError>(p, InvalidArgumentError)).field;
      expect(await field(store.queryRollouts({ modeIn: ["bogus" as never] }))).toMatch(/^mode_?[iI]n/);
    });

    test("sorting: times with nulls last in both orders, other nulls as empty values", async (store) => {
      const { a, b, c, d } = await seed(store);
      const byStart = await store.queryRollouts({ sortBy: "start_time", sortOrder: "desc" });
      expect(ids(byStart)).toEqual([d, c, b, a].map((r) => r.rollout_id));
      // end_time is set only for b and d (terminal); nulls stay last either way.
      const endAsc = ids(await store.queryRollouts({ sortBy: "end_time" }));
      const endDesc = ids(await store.queryRollouts({ sortBy: "end_time", sortOrder: "desc" }));
      expect(endAsc.slice(0, 2)).toEqual([b.rollout_id, d.rollout_id]);
      expect(endDesc.slice(0, 2)).toEqual([d.rollout_id, b.rollout_id]);
      expect(new Set(endAsc.slice(2))).toEqual(new Set([a.rollout_id, c.rollout_id]));
      expect(new Set(endDesc.slice(2))).toEqual(new Set([a.rollout_id, c.rollout_id]));
      // mode: c has null, which sorts as "".
      expect(ids(await store.queryRollouts({ sortBy: "mode" }))).toEqual(
        [c, d, a, b].map((r) => r.rollout_id),
      );
      expect(ids(await store.queryRollouts({ sortBy: "mode", sortOrder: "desc" }))).toEqual(
        [b, a, d, c].map((r) => r.rollout_id),
      );
      expect(ids(await store.queryRollouts({ sortBy: "status" }))).toEqual(
        [d, a, c, b].map((r) => r.rollout_id),
      );
    });

    test("pagination: totals, limit -1, offset past the end", async (store) => {
      const { a, b, c, d } = await seed(store);
      const page = await store.queryRollouts({ sortBy: "start_time", limit: 2, offset: 1 });
      expect(page).toMatchObject({ limit: 2, offset: 1, total: 4 });
      expect(ids(page)).toEqual([b.rollout_id, c.rollout_id]);
      const tail = await store.queryRollouts({ sortBy: "start_time", limit: 3, offset: 3 });
      expect(ids(tail)).toEqual([d.rollout_id]);
      const past = await store.queryRollouts({ limit: 2, offset: 10 });
      expect(past).toEqual({ items: [], limit: 2, offset: 10, total: 4 });
      const all = await store.queryRollouts({ limit: -1, offset: 2 });
      expect(ids(all)).toEqual([c.rollout_id, d.rollout_id]);
      const filtered = await store.queryRollouts({ statusIn: ["preparing", "queuing"], limit: 1 });
      expect(filtered.total).toBe(2);
      expect(ids(filtered)).toEqual([a.rollout_id]);
    });

    test("bad page options raise InvalidArgumentError naming the field", async (store) => {
      await seed(store);
      const field = async (p: Promise<unknown>) =>
        (await expectError<InvalidArgumentError>(p, InvalidArgumentError)).field;
      expect(await field(store.queryRollouts({ limit: 0 }))).toBe("limit");
      expect(await field(store.queryRollouts({ limit: -2 }))).toBe("limit");
      expect(await field(store.queryRollouts({ offset: -1 }))).toBe("offset");
      expect(await field(store.queryRollouts({ sortBy: "no_such_field" as any }))).toBe("sort_by");
      expect(await field(store.queryRollouts({ sortOrder: "sideways" as any }))).toBe("sort_order");
      expect(await field(store.queryAttempts("ro-x", { sortBy: "rollout" as any }))).toBe("sort_by");
      expect(await field(store.querySpans("ro-x", { limit: 0 }))).toBe("limit");
      expect(await field(store.queryResources({ sortBy: "nope" as any }))).toBe("sort_by");
      expect(await field(store.queryWorkers({ offset: -5 }))).toBe("offset");
    });

    test("queryAttempts sorts by sequence_id by default and pages", async (store) => {
      const r = await store.startRollout({ input: 1 });
      await store.startAttempt(r.rollout_id);
      await store.startAttempt(r.rollout_id);
      const asc = await store.queryAttempts(r.rollout_id);
      expect(asc.items.map((a) => a.sequence_id)).toEqual([1, 2, 3]);
      const desc = await store.queryAttempts(r.rollout_id, { sortOrder: "desc", limit: 2 });
      expect(desc.items.map((a) => a.sequence_id)).toEqual([3, 2]);
      expect(desc.total).toBe(3);
      const byStatus = await store.queryAttempts(r.rollout_id, { sortBy: "start_time", offset: 2 });
      expect(byStatus.items.map((a) => a.sequence_id)).toEqual([3]);
    });
  });
}
