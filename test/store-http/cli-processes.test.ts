import { LightningStoreClient } from "@agl/client";
import { InMemoryLightningStore, llm } from "@agl/core";
import { silentServerLogger, startStoreServer } from "@agl/store";
import { describe, expect, it } from "vitest";
import { spawnStoreServer, spawnTs, spawnWorker } from "./processes.js";

const AGENT = "test/store-http/fixtures/quick-agent.mjs";

describe("agl-worker process", () => {
  it("SIGTERM lets in-flight rollouts finish; past the grace period they are marked failed", async () => {
    const store = new InMemoryLightningStore();
    const server = await startStoreServer({ store, port: 0, logger: silentServerLogger, token: "tok" });
    try {
      await store.addResources({ main: llm({ endpoint: "http://unused/v1", model: "m" }) });
      const patient = await store.enqueueManyRollouts([
        { input: { sleepMs: 1200, reward: 1 }, metadata: { worker: "patient" } },
        { input: { sleepMs: 1200, reward: 1 }, metadata: { worker: "patient" } },
      ]);
      const common = ["--token", "tok", "--poll-interval-ms", "50", "--concurrency", "2"];
      const a = spawnWorker(server.url, AGENT, [...common, "--worker-id", "patient", "--max-rollouts", "2"]);
      // Wait until both are claimed by the patient worker before adding the slow ones.
      const claimedBy = async (worker: string, n: number) => {
        for (let i = 0; i < 400; i++) {
          const running = await store.queryRollouts({ statusIn: ["preparing", "running"] });
          const mine = running.items.filter(
            (r) => (r as { attempt?: { worker_id: string } }).attempt?.worker_id === worker,
          );
          if (mine.length >= n) return;
          await new Promise((r) => setTimeout(r, 50));
        }
        throw new Error(`${worker} did not claim ${n} rollouts: ${a.stderr()}`);
      };
      await claimedBy("patient", 2);
      const slow = await store.enqueueManyRollouts([{ input: { sleepMs: 20_000 } }]);
      const b = spawnWorker(server.url, AGENT, [
        ...common,
        "--worker-id",
        "hasty",
        "--grace-period-ms",
        "300",
      ]);
      await claimedBy("hasty", 1);

      a.proc.kill("SIGTERM");
      b.proc.kill("SIGTERM");
      expect(await a.exited, a.stderr()).toBe(0);
      expect(await b.exited, b.stderr()).toBe(0);
      expect(JSON.parse(a.stdout())).toMatchObject({ workerId: "patient", claimed: 2, succeeded: 2 });
      expect(JSON.parse(b.stdout())).toMatchObject({ workerId: "hasty", claimed: 1, abandoned: 1 });
      for (const r of patient) expect((await store.getRolloutById(r.rollout_id))?.status).toBe("succeeded");
      const abandoned = await store.getLatestAttempt(slow[0]!.rollout_id);
      expect(abandoned).toMatchObject({ status: "failed", metadata: { error: { type: "RunnerStopped" } } });
    } finally {
      await server.close();
      await store.close();
    }
  }, 30_000);

  it("exits 1 with a message when the agent module has no agent", async () => {
    const child = spawnWorker("http://127.0.0.1:9", "test/store-http/processes.ts");
    expect(await child.exited).toBe(1);
    expect(child.stderr()).toMatch(/must export an agent/);
  }, 20_000);
});

describe("agl-store process", () => {
  it("serves the chosen backend with a token, then shuts down cleanly on SIGINT", async () => {
    const server = await spawnStoreServer(["--db", "memory", "--token", "s3cret"]);
    try {
      expect((await fetch(`${server.url}/v1/agl/health`)).status).toBe(200);
      expect((await fetch(`${server.url}/v1/agl/statistics`)).status).toBe(401);
      const client = new LightningStoreClient({ url: server.url, token: "s3cret" });
      const r = await client.enqueueRollout({ input: 1 });
      expect((await client.getRolloutById(r.rollout_id))?.status).toBe("queuing");
    } finally {
      server.proc.kill("SIGINT");
    }
    expect(await server.exited).toBe(0);
  }, 20_000);

  it("rejects a bad --db with a message", async () => {
    const child = spawnTs("packages/store/src/cli.ts", ["--db", "mongodb://x", "--port", "0"]);
    expect(await child.exited).toBe(1);
    expect(child.stderr()).toMatch(/unsupported store URI scheme/);
  }, 20_000);
});
