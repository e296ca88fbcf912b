import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { describe, expect, it } from "vitest";
import { requestDeadline } from "../deadline.js";

const DEADLINE_MS = 600;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An app whose handler `/gate/:id` answers only when the test opens that gate, so what the test checks
 * is decided by events, not by how fast a loaded machine runs. Timers never fire early, so each
 * timed-out request is checked against a lower bound only.
 */
function app() {
  const gates = new Map<string, () => void>();
  const a = new Hono();
  a.use(
    "*",
    requestDeadline(DEADLINE_MS, () => new HTTPException(504, { message: "too slow" })),
  );
  a.get("/gate/:id", async (c) => {
    await new Promise<void>((resolve) => gates.set(c.req.param("id"), resolve));
    return c.json({ ok: true });
  });
  a.onError((error, c) =>
    c.json({ detail: error.message }, error instanceof HTTPException ? error.status : 500),
  );
  const open = async (id: string) => {
    while (!gates.has(id)) await sleep(1);
    gates.get(id)!();
  };
  const openAll = () => {
    for (const release of gates.values()) release();
  };
  return { a, open, openAll };
}

describe("requestDeadline (one shared timer)", () => {
  it("gives each request its own deadline, however the requests overlap", async () => {
    const { a, open, openAll } = app();
    const timed = async (id: string) => {
      const started = performance.now();
      const res = await a.request(`/gate/${id}`);
      return { status: res.status, took: performance.now() - started };
    };
    try {
      const first = timed("first");
      await sleep(DEADLINE_MS / 2);
      const second = timed("second"); // its deadline is later: it must not be swept with the first
      const quick = timed("quick");
      await open("quick");
      expect((await quick).status).toBe(200);
      const r1 = await first;
      expect(r1.status).toBe(504);
      expect(r1.took).toBeGreaterThanOrEqual(DEADLINE_MS - 2);
      const r2 = await second;
      expect(r2.status).toBe(504);
      expect(r2.took).toBeGreaterThanOrEqual(DEADLINE_MS - 2);
      // After an idle spell the timer is armed again.
      await sleep(50);
      const fast = timed("fast");
      await open("fast");
      expect((await fast).status).toBe(200);
      const slow = await timed("slow");
      expect(slow.status).toBe(504);
      expect(slow.took).toBeGreaterThanOrEqual(DEADLINE_MS - 2);
    } finally {
      openAll();
    }
  });
});
