import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LightningStoreClient } from "@agl/client";
import type { AttemptedRollout, Span } from "@agl/core";
import { afterAll, describe, expect, it } from "vitest";
import { type Child, spawnStoreServer, spawnTs, spawnWorker } from "../store-http/processes.js";
import { freePort } from "../support/free-port.js";
import { createTestDatabase } from "../support/postgres.js";

const WORKERS = 3;
const STORE_TOKEN = "store-token-for-the-multi-machine-test";
const PROXY_SECRET = "proxy-secret-shared-by-env-not-by-store";
// Another loopback address stands for the trainer machine's name: the proxy binds every interface and
// publishes this one, so an agent that reached it used the published URL (the proxy itself would say
// 127.0.0.1), and a worker holding the wrong secret would be refused.
const PUBLIC_HOST = "127.0.0.2";

const children: Child[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
  for (const f of cleanups.reverse()) await f();
});

describe("training across machines (separate processes, PostgreSQL store)", () => {
  it("agl-store on PostgreSQL, 3 agl-workers and a remote-only PPO trainer publishing its proxy URL", async () => {
    const db = await createTestDatabase();
    cleanups.push(db.drop);
    const dir = mkdtempSync(join(tmpdir(), "agl-multi-machine-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));

    // 1. The store server (its own process), on PostgreSQL, requiring a token.
    // It binds every interface and publishes another loopback address, which everyone below uses.
    const storePort = await freePort("0.0.0.0");
    const storeUrl = `http://127.0.0.3:${storePort}`;
    const storeServer = await spawnStoreServer([
      "--db",
      db.url,
      "--token",
      STORE_TOKEN,
      "--host",
      "0.0.0.0",
      "--port",
      String(storePort),
      "--public-url",
      storeUrl,
    ]);
    children.push(storeServer);
    expect(storeServer.stderr()).toContain(`"public_url":"${storeUrl}"`);
    const env = { AGL_STORE_TOKEN: STORE_TOKEN, AGL_PROXY_TOKEN_SECRET: PROXY_SECRET };

    // 2. Three workers, started before the trainer, as on machines of their own.
    for (let w = 0; w < WORKERS; w++) {
      children.push(
        spawnWorker(
          storeUrl,
          "test/multi-machine/fixtures/ab-agent.ts",
          ["--worker-id", `remote-${w}`, "--poll-interval-ms", "100", "--concurrency", "2"],
          env,
        ),
      );
    }

    // 3. The trainer process: remote-only PPO, proxy on 0.0.0.0 published as PUBLIC_HOST.
    const port = await freePort("0.0.0.0");
    const publicUrl = `http://${PUBLIC_HOST}:${port}`;
    const trainer = spawnTs(
      "test/multi-machine/trainer-process.ts",
      [storeUrl, String(port), publicUrl, dir],
      env,
    );
    children.push(trainer);
    const code = await trainer.exited;
    const logs = () => [trainer, ...children].map((c) => c.stderr()).join("\n");
    expect(code, logs()).toBe(0);
    const result = JSON.parse(trainer.stdout().trim().split("\n").pop()!);
    expect(result).toEqual({ stepsCompleted: 2, aborted: false });

    for (const c of children.slice(1, 1 + WORKERS)) c.proc.kill("SIGTERM");
    const workerCodes = await Promise.all(children.slice(1, 1 + WORKERS).map((c) => c.exited));
    expect(workerCodes, logs()).toEqual([0, 0, 0]);
    // Each worker said which store server it talks to.
    for (const c of children.slice(1, 1 + WORKERS)) {
      expect(c.stderr()).toMatch(/is an agl-ts store server \(PostgresLightningStore\)/);
    }
    const summaries = children
      .slice(1, 1 + WORKERS)
      .map((c) => JSON.parse(c.stdout().trim().split("\n").pop()!));

    // Every rollout was run by a worker process (none by the trainer), called the proxy through the
    // published URL with its own attempt's path, and the proxy recorded that call into the store.
    const client = new LightningStoreClient({ url: storeUrl, token: STORE_TOKEN });
    cleanups.push(() => client.close());
    const rollouts = (await client.queryRollouts({ limit: -1 })).items as AttemptedRollout[];
    expect(rollouts).toHaveLength(2 * 2 * 3);
    const workerIds = new Set<string>();
    for (const r of rollouts) {
      expect(r.status, logs()).toBe("succeeded");
      workerIds.add(r.attempt.worker_id!);
      const spans: Span[] = (await client.querySpans(r.rollout_id, { attemptId: "latest" })).items;
      const endpoints = spans
        .filter((s) => s.name === "agentlightning.message")
        .map((s) => s.attributes["agentlightning.message.body"]);
      expect(endpoints).toEqual([`${publicUrl}/rollout/${r.rollout_id}/attempt/${r.attempt.attempt_id}/v1`]);
      const llmCalls = spans.filter((s) => Array.isArray(s.attributes.prompt_token_ids));
      expect(llmCalls.length, JSON.stringify(spans.map((s) => s.name))).toBeGreaterThan(0);
    }
    expect([...workerIds].every((id) => /^remote-\d$/.test(id))).toBe(true);
    expect(summaries.reduce((n: number, s: { succeeded: number }) => n + s.succeeded, 0)).toBe(
      rollouts.length,
    );

    // The token secret travelled by environment only: nothing in the store carries it.
    const resources = await client.queryResources();
    expect(JSON.stringify(resources)).not.toContain(PROXY_SECRET);
    expect(JSON.stringify(resources)).toContain(`${publicUrl}/v1`);
  });
});
