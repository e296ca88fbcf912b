import { describe, expect, it } from "vitest";
import type { NamedResources } from "../../types/resources.js";
import type { StoreFactory } from "../helpers.js";
import { sleep, withStore } from "../helpers.js";

const llm = (model: string): NamedResources => ({
  main_llm: {
    resource_type: "llm",
    endpoint: "http://127.0.0.1:9/v1",
    model,
    api_key: null,
    sampling_parameters: { temperature: 0.5 },
  },
  prompt: { resource_type: "prompt_template", template: "Q: {question}", engine: "f-string" },
});

export function resourceAndWorkerTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));

  describe("resources", () => {
    test("add, update (upsert) and latest, with versions and times", async (store) => {
      expect(await store.getLatestResources()).toBeNull();
      const first = await store.addResources(llm("m1"));
      expect(first.resources_id).toMatch(/^rs-[0-9a-f]{12}$/);
      expect(first.version).toBe(1);
      expect(first.create_time).toBe(first.update_time);
      expect(first.resources).toEqual(llm("m1"));
      expect((await store.getLatestResources())?.resources_id).toBe(first.resources_id);

      const second = await store.addResources(llm("m2"));
      expect((await store.getLatestResources())?.resources_id).toBe(second.resources_id);
      await sleep(5);
      const updated = await store.updateResources(first.resources_id, llm("m1b"));
      expect(updated.version).toBe(2);
      expect(updated.create_time).toBe(first.create_time);
      expect(updated.update_time).toBeGreaterThan(first.update_time);
      expect(updated.resources.main_llm).toMatchObject({ model: "m1b" });
      expect((await store.getLatestResources())?.resources_id).toBe(first.resources_id);
      expect((await store.getResourcesById(first.resources_id))?.version).toBe(2);

      const upserted = await store.updateResources("rs-custom", llm("m3"));
      expect(upserted).toMatchObject({ resources_id: "rs-custom", version: 1 });
      expect((await store.getLatestResources())?.resources_id).toBe("rs-custom");

      const page = await store.queryResources();
      expect(page.items.map((r) => r.resources_id)).toEqual([
        first.resources_id,
        second.resources_id,
        "rs-custom",
      ]);
      expect((await store.queryResources({ resourcesIdContains: "custom" })).total).toBe(1);
      expect((await store.queryResources({ resourcesId: second.resources_id })).items[0]?.version).toBe(1);
      const byVersion = await store.queryResources({ sortBy: "version", sortOrder: "desc", limit: 1 });
      expect(byVersion.items[0]?.resources_id).toBe(first.resources_id);
      expect(byVersion.total).toBe(3);
    });

    test("rollouts take the latest resources id when none is given; explicit ids are kept unchecked", async (store) => {
      const none = await store.enqueueRollout({ input: 0 });
      expect(none.resources_id).toBeNull();
      const res = await store.addResources(llm("m"));
      const implicit = await store.enqueueRollout({ input: 1 });
      expect(implicit.resources_id).toBe(res.resources_id);
      const [many] = await store.enqueueManyRollouts([{ input: 2 }]);
      expect(many!.resources_id).toBe(res.resources_id);
      const started = await store.startRollout({ input: 3 });
      expect(started.resources_id).toBe(res.resources_id);
      const explicit = await store.enqueueRollout({ input: 4, resources_id: "rs-not-there" });
      expect(explicit.resources_id).toBe("rs-not-there");
    });
  });

  describe("workers", () => {
    test("dequeue makes a worker busy; success makes it idle; empty dequeue marks idle", async (store) => {
      await store.enqueueRollout({ input: 1 });
      const claimed = await store.dequeueRollout({ workerId: "w-1" });
      let worker = await store.getWorkerById("w-1");
      expect(worker).toMatchObject({
        worker_id: "w-1",
        status: "busy",
        current_rollout_id: claimed!.rollout_id,
        current_attempt_id: claimed!.attempt.attempt_id,
      });
      expect(worker!.last_dequeue_time).not.toBeNull();
      expect(worker!.last_busy_time).not.toBeNull();
      expect(claimed!.attempt.worker_id).toBe("w-1");
      await store.updateAttempt(claimed!.rollout_id, "latest", { status: "succeeded" });
      worker = await store.getWorkerById("w-1");
      expect(worker).toMatchObject({ status: "idle", current_rollout_id: null, current_attempt_id: null });
      expect(worker!.last_idle_time).not.toBeNull();

      expect(await store.dequeueRollout({ workerId: "w-2" })).toBeNull();
      const idle = await store.getWorkerById("w-2");
      expect(idle?.status).toBe("idle");
      expect(idle?.last_dequeue_time).not.toBeNull();
    });

    test("failure → idle; timeout and unresponsive → unknown; dequeueMany links the last claim", async (store) => {
      const f = await store.startRollout({ input: 1, worker_id: "w-f" });
      await store.updateAttempt(f.rollout_id, "latest", { status: "failed" });
      expect((await store.getWorkerById("w-f"))?.status).toBe("idle");
      const t = await store.startRollout({ input: 2, worker_id: "w-t" });
      await store.updateAttempt(t.rollout_id, "latest", { status: "timeout" });
      expect(await store.getWorkerById("w-t")).toMatchObject({ status: "unknown", current_attempt_id: null });
      const u = await store.startRollout({ input: 3, worker_id: "w-u" });
      await store.updateAttempt(u.rollout_id, "latest", { status: "unresponsive" });
      expect((await store.getWorkerById("w-u"))?.status).toBe("unknown");

      await store.enqueueManyRollouts([{ input: "x" }, { input: "y" }]);
      const claims = await store.dequeueManyRollouts({ limit: 2, workerId: "w-m" });
      expect(claims.every((c) => c.attempt.worker_id === "w-m")).toBe(true);
      expect((await store.getWorkerById("w-m"))?.current_rollout_id).toBe(claims[1]!.rollout_id);
    });

    test("assigning a worker to an attempt makes that worker busy on it", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const updated = await store.updateAttempt(r.rollout_id, "latest", { worker_id: "w-late" });
      expect(updated.worker_id).toBe("w-late");
      expect(await store.getWorkerById("w-late")).toMatchObject({
        status: "busy",
        current_rollout_id: r.rollout_id,
        current_attempt_id: r.attempt.attempt_id,
      });
    });

    test("updateWorker is a heartbeat: upsert, stats replaced, status unchanged", async (store) => {
      const fresh = await store.updateWorker("w-h", { heartbeat_stats: { cpu_percent: 12.5 } });
      expect(fresh).toMatchObject({
        worker_id: "w-h",
        status: "unknown",
        heartbeat_stats: { cpu_percent: 12.5 },
      });
      expect(fresh.last_heartbeat_time).not.toBeNull();
      await store.startRollout({ input: 1, worker_id: "w-h" });
      await sleep(5);
      const beat = await store.updateWorker("w-h", { heartbeat_stats: { mem_percent: 40 } });
      expect(beat.status).toBe("busy");
      expect(beat.heartbeat_stats).toEqual({ mem_percent: 40 });
      expect(beat.last_heartbeat_time!).toBeGreaterThan(fresh.last_heartbeat_time!);
      const kept = await store.updateWorker("w-h");
      expect(kept.heartbeat_stats).toEqual({ mem_percent: 40 });
    });

    test("queryWorkers filters by status and id and pages", async (store) => {
      await store.startRollout({ input: 1, worker_id: "busy-1" });
      await store.dequeueRollout({ workerId: "idle-1" });
      await store.dequeueRollout({ workerId: "idle-2" });
      await store.updateWorker("hb-1");
      const idle = await store.queryWorkers({ statusIn: ["idle"] });
      expect(idle.items.map((w) => w.worker_id).sort()).toEqual(["idle-1", "idle-2"]);
      expect((await store.queryWorkers({ workerIdContains: "1" })).total).toBe(3);
      const either = await store.queryWorkers({
        statusIn: ["busy"],
        workerIdContains: "hb",
        filterLogic: "or",
      });
      expect(either.items.map((w) => w.worker_id).sort()).toEqual(["busy-1", "hb-1"]);
      const page = await store.queryWorkers({ sortBy: "worker_id", sortOrder: "desc", limit: 2 });
      expect(page.items.map((w) => w.worker_id)).toEqual(["idle-2", "idle-1"]);
      expect(page.total).toBe(4);
    });
  });
}
