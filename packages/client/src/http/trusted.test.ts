import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { InvalidArgumentError } from "@agl/core";
import { afterEach, describe, expect, it } from "vitest";
import { LightningStoreClient } from "../store-client.js";
import { AGL_SERVER_HEADER } from "./trusted.js";

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A server answering every dequeue with `body`, marked as an agl server or not. */
async function dequeueServer(body: unknown, agl: boolean): Promise<LightningStoreClient> {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (agl) headers[AGL_SERVER_HEADER] = "agl-ts";
      res.writeHead(200, headers).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return new LightningStoreClient({ url, retryDelaysMs: [] });
}

// What a Python Agent Lightning server may send: fields with defaults left out.
const sparse = {
  rollout_id: "ro-1",
  input: { q: 1 },
  start_time: 1,
  status: "preparing",
  attempt: { rollout_id: "ro-1", attempt_id: "at-1", sequence_id: 1, start_time: 1 },
};

describe("answers of hot routes", () => {
  it("are fully parsed (defaults filled) when the server is not an agl server", async () => {
    const client = await dequeueServer([sparse], false);
    const [claimed] = await client.dequeueManyRollouts({ limit: 1 });
    expect(claimed!.config).toMatchObject({ max_attempts: 1, retry_condition: [] });
    expect(claimed!.attempt.status).toBe("preparing");
    await client.close();
  });

  it("from a non-agl server fail on a bad field with its name", async () => {
    const client = await dequeueServer([{ ...sparse, start_time: "soon" }], false);
    const error = await client.dequeueManyRollouts({ limit: 1 }).catch((e) => e);
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    expect(error.field).toContain("[0].start_time");
    await client.close();
  });

  it("from an agl server get a shape check that still names a missing field", async () => {
    const ok = await dequeueServer(
      [{ ...sparse, attempt: { ...sparse.attempt, status: "preparing" } }],
      true,
    );
    expect((await ok.dequeueManyRollouts({ limit: 1 }))[0]!.attempt.attempt_id).toBe("at-1");
    await ok.close();
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    const bad = await dequeueServer([{ input: 1, attempt: {} }], true);
    const error = await bad.dequeueManyRollouts({ limit: 1 }).catch((e) => e);
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    expect(error.field).toBe("response of POST queues/rollouts/dequeue[0].rollout_id");
    await bad.close();
  });
});
