import { Worker } from "@agl/client";
import { InMemoryLightningStore, type Logger } from "@agl/core";
import { silentServerLogger, startStoreServer } from "@agl/store";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** A worker says which store server it talks to; a refused token stops it before it claims anything. */

let server: Awaited<ReturnType<typeof startStoreServer>>;
beforeAll(async () => {
  server = await startStoreServer({
    store: new InMemoryLightningStore(),
    port: 0,
    token: "right-token",
    logger: silentServerLogger,
  });
});
afterAll(async () => {
  await server.close();
});

const warnings: string[] = [];
const logger: Logger = {
  debug: () => {},
  info: () => {},
  warn: (m: string) => warnings.push(m),
  error: () => {},
};
const worker = (url: string, token: string) =>
  new Worker({ store: url, token, agent: async () => 1, handleSignals: false, logger });

describe("Worker.describeServer", () => {
  it("names an agl-ts server and its store", async () => {
    const info = await worker(server.url, "right-token").describeServer();
    expect(info).toMatchObject({ kind: "agl-ts", storeName: "InMemoryLightningStore" });
    expect(info!.description).toBe("agl-ts store server (InMemoryLightningStore)");
  });

  it("throws on a refused token, and only warns while the server is unreachable", async () => {
    await expect(worker(server.url, "wrong-token").describeServer()).rejects.toMatchObject({ status: 401 });
    const w = new Worker({
      store: "http://127.0.0.1:1",
      agent: async () => 1,
      handleSignals: false,
      logger,
    });
    expect(await w.describeServer()).toBeNull();
    expect(warnings.some((m) => m.includes("could not identify the store server yet"))).toBe(true);
  });
});
