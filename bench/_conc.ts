import { InMemoryLightningStore } from "@agl/core";
import { LightningStoreClient } from "@agl/client";
import { silentServerLogger, startStoreServer } from "@agl/store";
const store = new InMemoryLightningStore();
const server = await startStoreServer({ store, port: 0, logger: silentServerLogger });
const client = new LightningStoreClient({ url: server.url });
await client.enqueueManyRollouts(Array.from({ length: 3000 }, (_, i) => ({ input: i })));
let n = 0;
let t = performance.now();
await Promise.all(Array.from({ length: 32 }, async (_, w) => {
  for (let i = 0; i < 30; i++) { const r = await client.dequeueRollout({ workerId: `w${w}` }); if (r) { await client.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" }); n++; } }
}));
console.log("client rollouts/s", (n / ((performance.now() - t) / 1000)).toFixed(0));
n = 0; t = performance.now();
await Promise.all(Array.from({ length: 32 }, async (_, w) => {
  for (let i = 0; i < 30; i++) {
    const res = await fetch(`${server.url}/v1/agl/queues/rollouts/dequeue`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ limit: 1, worker_id: `w${w}` }) });
    const [r] = await res.json() as any[];
    if (r) { await (await fetch(`${server.url}/v1/agl/rollouts/${r.rollout_id}/attempts/${r.attempt.attempt_id}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ status: "succeeded" }) })).text(); n++; }
  }
}));
console.log("raw fetch rollouts/s", (n / ((performance.now() - t) / 1000)).toFixed(0));
await client.close(); await server.close(); await store.close();
