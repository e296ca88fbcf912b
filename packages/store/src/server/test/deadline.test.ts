import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { describe, expect, it } from "vitest";
import { requestDeadline } from "../deadline.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function app(ms: number) {
  const a = new Hono();
  a.use(
    "*",
    requestDeadline(ms, () => new HTTPException(504, { message: "too slow" })),
  );
  a.get("/sleep/:ms", async (c) => {
    await sleep(Number(c.req.param("ms")));
    return c.json({ ok: true });
  });
  a.onError((error, c) =>
    c.json({ detail: error.message }, error instanceof HTTPException ? error.status : 500),
  );
  return a;
}

describe("requestDeadline (one shared timer)", () => {
  it("gives each request its own deadline, however the requests overlap", async () => {
    const a = app(120);
    const started = performance.now();
    const timed = async (path: string) => {
      const res = await a.request(path);
      return { status: res.status, at: performance.now() - started };
    };
    const first = timed("/sleep/400"); // deadline ~120
    await sleep(60);
    const second = timed("/sleep/400"); // deadline ~180: not swept with the first
    const quick = timed("/sleep/80"); // answers at ~140, after the first timed out
    const [r1, r2, r3] = await Promise.all([first, second, quick]);
    expect(r1.status).toBe(504);
    expect(r1.at).toBeGreaterThanOrEqual(110);
    expect(r1.at).toBeLessThan(175);
    expect(r2.status).toBe(504);
    expect(r2.at).toBeGreaterThanOrEqual(170);
    expect(r3.status).toBe(200);
    // After an idle spell the timer is armed again.
    await sleep(50);
    expect((await timed("/sleep/10")).status).toBe(200);
    expect((await timed("/sleep/300")).status).toBe(504);
  });
});
