import { connect, type Socket } from "node:net";
import { MAX_DEQUEUE_LIMIT } from "@agl/core";
import { afterEach, describe, expect, it } from "vitest";
import { jsonLinesLogger } from "../logging.js";
import { type Harness, harness } from "./helpers.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket));
    socket.once("error", reject);
  });
}

/** Resolves with what the server sent once it closes the connection, or "open" after `ms`. */
function closedWithin(socket: Socket, ms: number): Promise<string> {
  return new Promise((resolve) => {
    let received = "";
    socket.on("data", (d) => {
      received += d.toString();
    });
    socket.on("error", () => {});
    const timer = setTimeout(() => resolve("open"), ms);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(received);
    });
  });
}

describe("store server connection limits", () => {
  it("a request body that trickles in is cut at the request timeout, not held for minutes", async () => {
    h = await harness({ requestTimeoutMs: 1000 });
    const socket = await open(h.server.url);
    socket.write(
      "POST /v1/agl/queues/rollouts/enqueue HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    );
    const answer = await closedWithin(socket, 8000);
    expect(answer).not.toBe("open");
    expect(answer).toMatch(/^HTTP\/1\.1 (408|504)/);
    expect((await h.call("GET", "/v1/agl/health")).status).toBe(200);
  });

  it("headers that never finish are cut at the headers timeout", async () => {
    h = await harness({ headersTimeoutMs: 500, requestTimeoutMs: 1000 });
    const socket = await open(h.server.url);
    socket.write("GET /v1/agl/health HTTP/1.1\r\nHost: x\r\n");
    expect(await closedWithin(socket, 8000)).not.toBe("open");
  });

  it("a client aborting its upload is logged as such, never as an unhandled error", async () => {
    const logs: Array<Record<string, unknown>> = [];
    h = await harness({ logger: jsonLinesLogger((line) => logs.push(JSON.parse(line))) });
    const socket = await open(h.server.url);
    socket.write(
      'POST /v1/agl/queues/rollouts/enqueue HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"rollouts":',
    );
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    for (let i = 0; i < 50 && !logs.some((l) => l.msg === "client aborted"); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(logs.some((l) => l.msg === "client aborted")).toBe(true);
    expect(logs.filter((l) => l.level === "error")).toEqual([]);
  });

  it("caps open connections", async () => {
    h = await harness({ maxConnections: 2 });
    const held = [await open(h.server.url), await open(h.server.url)];
    const third = await open(h.server.url);
    expect(await closedWithin(third, 3000)).toBe("");
    for (const s of held) s.destroy();
  });

  it("clamps the dequeue batch size to the maximum (a Python client cannot see a 422); a non-integer is still 422", async () => {
    h = await harness();
    await h.store.enqueueManyRollouts(
      Array.from({ length: MAX_DEQUEUE_LIMIT + 3 }, (_, i) => ({ input: i })),
    );
    const res = await h.call("POST", "/v1/agl/queues/rollouts/dequeue", { limit: 1_000_000 });
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(MAX_DEQUEUE_LIMIT);
    const bad = await h.call("POST", "/v1/agl/queues/rollouts/dequeue", { limit: 2.5 });
    expect([bad.status, bad.body.field]).toEqual([422, "limit"]);
  });
});
