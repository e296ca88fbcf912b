import { AgentLightningClient } from "@agl/client";
import { InMemoryLightningStore, llm } from "@agl/core";
import type { StoreServer } from "@agl/store";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { serve } from "./support.js";

const main = llm({ endpoint: "http://llm/v1", model: "m" });
let store: InMemoryLightningStore;
let server: StoreServer;

beforeEach(async () => {
  store = new InMemoryLightningStore();
  // Long enough that no claim times out while a loaded machine runs a test; the requeue test has its own.
  server = await serve(store, { legacyTaskTimeoutSeconds: 120, token: "t" });
});
afterEach(async () => {
  await server.close();
  await store.close();
});

describe("legacy task API with AgentLightningClient", () => {
  it("poll a task, fetch its resources, post the result: the rollout succeeds with a reward span", async () => {
    const client = new AgentLightningClient({
      url: server.url,
      token: "t",
      pollIntervalMs: 20,
      workerId: "legacy-1",
    });
    expect(await client.getLatestResources()).toBeNull();
    expect(await client.getTask()).toBeNull();
    const resources = await store.addResources({ main });
    const rollout = await store.enqueueRollout({ input: { q: "2+2" }, mode: "train" });
    const task = await client.pollNextTask();
    expect(task).toMatchObject({
      rollout_id: rollout.rollout_id,
      input: { q: "2+2" },
      mode: "train",
      resources_id: resources.resources_id,
      num_claims: 1,
      create_time: rollout.start_time,
    });
    expect((await client.getResourcesById(task.resources_id!))?.resources.main).toEqual(main);
    expect(await client.getResourcesById("rs-unknown")).toBeNull();
    expect((await client.getLatestResources())?.resources_id).toBe(resources.resources_id);
    expect((await store.getWorkerById("legacy-1"))?.status).toBe("busy");

    const ack = await client.postRollout({
      rollout_id: task.rollout_id,
      final_reward: 0.75,
      triplets: [],
      logs: ["ok"],
    });
    expect(ack.status).toBe("ok");
    const done = await store.getRolloutById(rollout.rollout_id);
    expect(done?.status).toBe("succeeded");
    const spans = (await store.querySpans(rollout.rollout_id)).items;
    expect(spans).toHaveLength(1);
    expect(spans[0]!.attributes).toMatchObject({ "agentlightning.reward.0.value": 0.75 });
    const attempt = await store.getLatestAttempt(rollout.rollout_id);
    expect(attempt?.metadata).toMatchObject({ legacy_result: { final_reward: 0.75, logs: ["ok"] } });
  });

  it("a claim without a result past the task timeout is requeued and claimed again", async () => {
    await server.close();
    // Short enough to wait for, long enough for the immediate second poll to find nothing.
    server = await serve(store, { legacyTaskTimeoutSeconds: 3, token: "t" });
    const client = new AgentLightningClient({ url: server.url, token: "t", pollIntervalMs: 50 });
    await store.addResources({ main });
    const rollout = await store.enqueueRollout({ input: 1 });
    const first = await client.getTask();
    expect(first?.num_claims).toBe(1);
    expect(await client.getTask()).toBeNull();
    // Polls until the store's watchdog has requeued the claim (an event, however long it takes).
    const second = await client.pollNextTask();
    expect(second).toMatchObject({ rollout_id: rollout.rollout_id, num_claims: 2 });
    const attempts = (await store.queryAttempts(rollout.rollout_id)).items;
    expect(attempts.map((a) => a.status)).toEqual(["timeout", "preparing"]);
    await client.postRollout({ rollout_id: rollout.rollout_id, final_reward: 1 });
    expect((await store.getRolloutById(rollout.rollout_id))?.status).toBe("succeeded");
  });

  it("posting for an unknown rollout is a 404; a malformed result is a 422", async () => {
    const client = new AgentLightningClient({ url: server.url, token: "t" });
    await expect(client.postRollout({ rollout_id: "ro-nope", final_reward: 1 })).rejects.toMatchObject({
      status: 404,
    });
    await expect(client.postRollout({ rollout_id: "" })).rejects.toMatchObject({ status: 422 });
    const noToken = new AgentLightningClient({ url: server.url });
    await expect(noToken.getTask()).rejects.toMatchObject({ status: 401 });
  });
});
