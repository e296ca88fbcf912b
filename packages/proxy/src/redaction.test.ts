import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { InMemoryLightningStore } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../test/support/postgres.js";
import { LLMProxy } from "./proxy.js";

const cli = fileURLToPath(new URL("./cli.ts", import.meta.url));

let db: { url: string; drop: () => Promise<void> };
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

describe("secrets stay out of agl-proxy's output and health route", () => {
  it("the startup line does not print the PostgreSQL password of --store", async () => {
    const mock = await startMockLLMServer();
    // The test cluster trusts local connections, so any password connects; it must not be printed.
    const withPassword = db.url.replace("postgres://postgres@", "postgres://postgres:hunter2-secret@");
    expect(withPassword).toContain("hunter2-secret");
    const child = spawn(
      process.execPath,
      ["--import", "tsx", cli, "--store", withPassword, "--backend", `${mock.url}/v1`, "--port", "0"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no startup line: ${out}`)), 30_000);
        const onData = (d: Buffer) => {
          out += d.toString();
          if (out.includes("listening on")) {
            clearTimeout(timer);
            resolve();
          }
        };
        child.stdout.on("data", onData);
        child.stderr.on("data", onData);
        child.once("exit", (code) => reject(new Error(`exited ${code}: ${out}`)));
      });
      expect(out).toContain("recording into postgres://postgres:***@");
      expect(out).not.toContain("hunter2-secret");
    } finally {
      child.kill("SIGKILL");
      await mock.close();
    }
  });

  it("/health shows backend URLs to the admin only, and never their credentials", async () => {
    const mock = await startMockLLMServer();
    const store = new InMemoryLightningStore();
    const backendUrl = mock.url.replace("http://", "http://user:pa55word@");
    const proxy = new LLMProxy({
      store,
      backends: [{ url: `${backendUrl}/v1?api_key=sk-live-123` }],
      adminToken: "admin-token-0123456789",
      logger: { warn: () => {}, error: () => {} },
    });
    await proxy.start();
    try {
      const anonymous = await (await fetch(`${proxy.url}/health`)).json();
      expect(anonymous).toMatchObject({ status: "ok", backends: [{ healthy: true }] });
      expect(anonymous.backends[0].url).toBeUndefined();
      const res = await fetch(`${proxy.url}/health`, {
        headers: { authorization: "Bearer admin-token-0123456789" },
      });
      const text = await res.text();
      expect(text).not.toContain("pa55word");
      expect(text).not.toContain("sk-live-123");
      expect(JSON.parse(text).backends[0].url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    } finally {
      await proxy.stop();
      await store.close();
      await mock.close();
    }
  });
});
