import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { InMemoryLightningStore, type LightningStore } from "@agl/core";
import { afterEach, describe, expect, it } from "vitest";
import { AGL_SERVER_HEADER, createStoreApp } from "../app.js";
import { fastRoutes } from "../fast-routes.js";
import type { StoreServerLogger } from "../logging.js";
import { RequestLog } from "../request-log.js";

const API = "/v1/agl";
const TOKEN = "s3cret";
const AUTH = { authorization: `Bearer ${TOKEN}` };

interface Line {
  level: string;
  message: string;
  fields: Record<string, unknown>;
}
function capture(): { logger: StoreServerLogger; lines: Line[] } {
  const lines: Line[] = [];
  const at =
    (level: string) =>
    (message: string, fields: Record<string, unknown> = {}) =>
      lines.push({ level, message, fields });
  return { lines, logger: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") } };
}

interface Answer {
  status: number;
  body: any;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * The fast path in front of a fallback that records what it got, and the hono app on the same store
 * (its own logger), so every request can be asked of both.
 */
async function pair(store: LightningStore, requestTimeoutMs = 60_000) {
  const fastLog = capture();
  const honoLog = capture();
  const fast = fastRoutes({
    store,
    token: TOKEN,
    bodyLimitBytes: 4096,
    requestTimeoutMs,
    requestLog: new RequestLog(fastLog.logger),
    logger: fastLog.logger,
    serverHeader: AGL_SERVER_HEADER,
  });
  const fellBack: string[] = [];
  const fallback = (req: IncomingMessage, res: ServerResponse) => {
    fellBack.push(`${req.method} ${req.url}`);
    req.resume();
    res.writeHead(599).end();
  };
  const server: Server = createServer((req, res) => fast(req, res) || fallback(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const app = createStoreApp(store, {
    token: TOKEN,
    bodyLimitBytes: 4096,
    requestTimeoutMs,
    logger: honoLog.logger,
  });

  /** POST through the fast path's server (raw node client: exact headers, chunked on demand). */
  const viaFast = (path: string, body: string, headers: Record<string, string> = AUTH, chunked = false) =>
    new Promise<Answer>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          method: "POST",
          path,
          headers: chunked ? headers : { ...headers, "content-length": Buffer.byteLength(body) },
        },
        (res) => {
          let text = "";
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () =>
            resolve({
              status: res.statusCode!,
              body: text === "" ? null : JSON.parse(text),
              headers: res.headers,
            }),
          );
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  const viaHono = async (path: string, body: string, headers: Record<string, string> = AUTH) => {
    const res = await app.request(path, { method: "POST", body, headers });
    const text = await res.text();
    return { status: res.status, body: text === "" ? null : JSON.parse(text) };
  };
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return { viaFast, viaHono, fellBack, fastLog, honoLog, close };
}

type Pair = Awaited<ReturnType<typeof pair>>;
let p: Pair | undefined;
afterEach(async () => {
  await p?.close();
  p = undefined;
});

/** Log lines without what differs by nature between two answers (durations, stacks). */
const comparable = (lines: Line[]) =>
  lines.map(({ level, message, fields }) => {
    const { duration_ms: _d, stack: _s, ...rest } = fields;
    return { level, message, fields: rest };
  });

describe("fast routes: the three hot requests answered without hono", () => {
  it("answers start_rollout, add_span and update_attempt itself, with the marker header", async () => {
    const store = new InMemoryLightningStore();
    p = await pair(store);
    const started = await p.viaFast(`${API}/rollouts`, JSON.stringify({ input: { task: 1 } }));
    expect(started.status).toBe(201);
    expect(started.headers[AGL_SERVER_HEADER]).toBe("agl-ts");
    expect(started.headers["content-type"]).toBe("application/json");
    const rid = started.body.rollout_id as string;
    const aid = started.body.attempt.attempt_id as string;
    expect(await store.getRolloutById(rid)).toMatchObject({ status: "preparing" });

    const span = {
      rollout_id: rid,
      attempt_id: aid,
      sequence_id: 1,
      trace_id: "t",
      span_id: "s1",
      name: "n",
    };
    const added = await p.viaFast(`${API}/spans`, JSON.stringify(span));
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ span_id: "s1", sequence_id: 1 });

    const done = await p.viaFast(
      `${API}/rollouts/${rid}/attempts/${aid}`,
      JSON.stringify({ status: "succeeded" }),
    );
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ attempt_id: aid, status: "succeeded" });
    expect((await store.getRolloutById(rid))?.status).toBe("succeeded");
    expect((await store.querySpans(rid)).total).toBe(1);
    expect(p.fellBack).toEqual([]);
    // Answered requests are counted in the request log (debug lines), as the hono app does.
    expect(p.fastLog.lines.filter((l) => l.message === "request").map((l) => l.fields.status)).toEqual([
      201, 201, 200,
    ]);
  });

  it("leaves everything whose answer hono decides to the hono app", async () => {
    p = await pair(new InMemoryLightningStore());
    const body = JSON.stringify({ input: 1 });
    await p.viaFast(`${API}/rollouts`, body, {}); // no token: hono's 401
    await p.viaFast(`${API}/rollouts`, body, { authorization: `bearer ${TOKEN}` }); // another spelling
    await p.viaFast(`${API}/rollouts`, body, { authorization: "Bearer wrong!" });
    await p.viaFast(`${API}/rollouts`, body, { ...AUTH, "transfer-encoding": "chunked" }, true);
    await p.viaFast(`${API}/rollouts`, "x".repeat(5000)); // over the body limit: hono's 413
    await p.viaFast(`${API}/rollouts?x=1`, body);
    await p.viaFast(`${API}/rollouts/r%31/attempts/a`, body);
    await p.viaFast(`${API}/rollouts/r/attempts/search`, body);
    await p.viaFast(`${API}/rollouts/r/attempts`, body);
    await p.viaFast(`${API}/rollouts/search`, body);
    await p.viaFast(`${API}/spans/batch`, body);
    expect(p.fellBack).toEqual([
      `POST ${API}/rollouts`,
      `POST ${API}/rollouts`,
      `POST ${API}/rollouts`,
      `POST ${API}/rollouts`,
      `POST ${API}/rollouts`,
      `POST ${API}/rollouts?x=1`,
      `POST ${API}/rollouts/r%31/attempts/a`,
      `POST ${API}/rollouts/r/attempts/search`,
      `POST ${API}/rollouts/r/attempts`,
      `POST ${API}/rollouts/search`,
      `POST ${API}/spans/batch`,
    ]);
  });

  it("refuses exactly as the hono app does: status, body naming the field, and the log lines", async () => {
    const store = new InMemoryLightningStore();
    p = await pair(store);
    const { rollout_id: rid, attempt } = await store.startRollout({ input: 1 });
    const aid = attempt.attempt_id;
    await store.updateAttempt(rid, aid, { status: "succeeded" });
    const deep = `${"[".repeat(200)}${"]".repeat(200)}`;
    const deepLarge = `{"a":${"[".repeat(200)}${" ".repeat(2048)}${"]".repeat(200)}}`;
    const span = { rollout_id: rid, attempt_id: aid, sequence_id: 1, trace_id: "t", span_id: "s", name: "n" };
    const cases: Array<[string, string]> = [
      [`${API}/rollouts`, "{bad"],
      [`${API}/rollouts`, ""],
      [`${API}/rollouts`, deep],
      [`${API}/rollouts`, deepLarge],
      [`${API}/rollouts`, JSON.stringify({ input: 1, worker_id: 5 })],
      [`${API}/rollouts`, JSON.stringify({ input: 1, mode: "nope" })],
      [`${API}/spans`, JSON.stringify({ ...span, sequence_id: "one" })],
      [`${API}/spans`, JSON.stringify({ ...span, rollout_id: "ro-missing" })],
      [`${API}/spans`, JSON.stringify([1])],
      [`${API}/rollouts/${rid}/attempts/${aid}`, JSON.stringify({ status: null })],
      [`${API}/rollouts/${rid}/attempts/${aid}`, JSON.stringify({ status: "bogus" })],
      [`${API}/rollouts/${rid}/attempts/${aid}`, "[]"],
      [`${API}/rollouts/${rid}/attempts/at-missing`, "{}"],
      [`${API}/rollouts/ro-missing/attempts/${aid}`, JSON.stringify({ status: "failed" })],
    ];
    for (const [path, body] of cases) {
      const fast = await p.viaFast(path, body);
      const hono = await p.viaHono(path, body);
      expect({ path, body, status: fast.status, answer: fast.body }).toEqual({
        path,
        body,
        status: hono.status,
        answer: hono.body,
      });
      expect(fast.status).toBeGreaterThanOrEqual(400);
      expect(fast.status).toBeLessThan(500);
    }
    expect(p.fellBack).toEqual([]);
    const fastLines = comparable(p.fastLog.lines);
    expect(fastLines).toEqual(comparable(p.honoLog.lines));
    // Each refusal is logged (info) and warned about with its route, reason and the ids it named.
    expect(fastLines.filter((l) => l.level === "warn")).toHaveLength(cases.length);
    expect(fastLines).toContainEqual({
      level: "warn",
      message: "request refused",
      fields: expect.objectContaining({
        route: `${API}/rollouts/:rid/attempts/:aid`,
        rollout_id: "ro-missing",
        attempt_id: aid,
        status: 404,
        field: "rollout_id",
      }),
    });
  });

  it("answers a store fault with the same 500 and error line, and a slow store with the same 504", async () => {
    const broken = Object.assign(new InMemoryLightningStore(), {
      startRollout: async () => {
        throw new Error("disk on fire");
      },
    });
    p = await pair(broken);
    const body = JSON.stringify({ input: 1 });
    const fast = await p.viaFast(`${API}/rollouts`, body);
    const hono = await p.viaHono(`${API}/rollouts`, body);
    expect(fast).toMatchObject({
      status: 500,
      body: { detail: "Internal server error", error_type: "Error" },
    });
    expect(fast.body).toEqual(hono.body);
    expect(comparable(p.fastLog.lines)).toEqual(comparable(p.honoLog.lines));
    expect(p.fastLog.lines.find((l) => l.level === "error")?.fields).toMatchObject({
      message: "disk on fire",
    });
    await p.close();

    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = Object.assign(new InMemoryLightningStore(), {
      startRollout: async () => {
        await gate;
        throw new Error("too late");
      },
    });
    p = await pair(slow, 50);
    const [late, lateHono] = await Promise.all([
      p.viaFast(`${API}/rollouts`, body),
      p.viaHono(`${API}/rollouts`, body),
    ]);
    release();
    expect(late).toMatchObject({ status: 504, body: { error_type: "HTTPException" } });
    expect(late.body).toEqual(lateHono.body);
  });
});
