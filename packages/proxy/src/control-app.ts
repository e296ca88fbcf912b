import type { IncomingMessage } from "node:http";
import { bodyNestsTooDeep, MAX_BODY_NESTING_DEPTH } from "@agl/core";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import type { Authenticator } from "./auth.js";
import type { BackendPool } from "./backends.js";
import type { CaptureCounters } from "./call-recorder.js";
import { ModelVersionSchema } from "./options.js";
import type { PauseGate, PauseState } from "./pause.js";
import type { SessionRegistry } from "./sessions.js";

export interface ControlDeps {
  auth: Authenticator;
  pool: BackendPool;
  gate: PauseGate;
  sessions: SessionRegistry;
  /** Spans recorded and lost so far, reported by GET /proxy/state. */
  captureCounters(): CaptureCounters;
  /** Resolves once every ended call's span has been handed to the store. */
  flush(): Promise<void>;
  maxBodyBytes: number;
  pause(options: {
    retryAfterSeconds?: number;
    reason?: string | null;
    mode?: "reject" | "hold";
    drain?: boolean;
    drainTimeoutMs?: number;
  }): Promise<PauseState>;
  resume(options: { modelVersion?: string | number | null }): Promise<PauseState>;
  mintAttemptToken(rolloutId: string, attemptId: string, options?: { ttlSeconds?: number | null }): string;
}

type Env = { Bindings: { incoming: IncomingMessage } };

const PauseBody = z
  .object({
    retry_after_seconds: z.number().min(0).optional(),
    reason: z.string().nullable().optional(),
    mode: z.enum(["reject", "hold"]).optional(),
    drain: z.boolean().optional(),
    drain_timeout_seconds: z.number().positive().optional(),
  })
  .strict();
const ResumeBody = z.object({ model_version: ModelVersionSchema.nullable().optional() }).strict();
const SessionBody = z
  .object({ rollout_id: z.string().min(1).optional(), attempt_id: z.string().min(1).optional() })
  .strict();
const TokenBody = z
  .object({
    rollout_id: z.string().min(1),
    attempt_id: z.string().min(1),
    ttl_seconds: z.number().positive().nullable().optional(),
  })
  .strict();

async function jsonBody<S extends z.ZodType>(
  req: { text(): Promise<string> },
  schema: S,
): Promise<{ ok: true; value: z.output<S> } | { ok: false; detail: unknown }> {
  const text = await req.text();
  let raw: unknown = {};
  // Depth before parsing: a deep body costs its parse's memory only to be refused by the schema.
  if (bodyNestsTooDeep(text, MAX_BODY_NESTING_DEPTH)) {
    return { ok: false, detail: `body nests arrays/objects deeper than ${MAX_BODY_NESTING_DEPTH} levels` };
  }
  if (/\S/.test(text)) {
    try {
      raw = JSON.parse(text);
    } catch {
      return { ok: false, detail: "body is not valid JSON" };
    }
  }
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  return {
    ok: false,
    detail: parsed.error.issues.map((i) => ({ loc: ["body", ...i.path.map(String)], msg: i.message })),
  };
}

/** Control, session and health routes (everything but the LLM calls, which take the fast path). */
export function createControlApp(d: ControlDeps): Hono<Env> {
  const app = new Hono<Env>();
  app.use(
    "*",
    bodyLimit({ maxSize: d.maxBodyBytes, onError: (c) => c.json({ detail: "request body too large" }, 413) }),
  );

  const health = (c: any) => {
    // Backend URLs and errors are topology: only for the admin (or an open proxy); others see health.
    const full = d.auth.isAdmin(c.env.incoming.headers);
    const backends = d.pool.backends.map((b) => (full ? b.state() : { healthy: b.state().healthy }));
    return c.json({
      status: backends.some((b) => b.healthy) ? "ok" : "degraded",
      mode: "http",
      paused: d.gate.isPaused,
      inflight: d.gate.inflight,
      backends,
    });
  };
  app.get("/health", health);
  app.get("/healthz", (c) => c.json({ status: "ok" }));

  app.use("/proxy/*", async (c, next) => {
    if (!d.auth.isAdmin(c.env.incoming.headers)) return c.json({ detail: "Invalid or missing API key" }, 401);
    await next();
  });

  app.post("/proxy/pause", async (c) => {
    const body = await jsonBody(c.req, PauseBody);
    if (!body.ok) return c.json({ detail: body.detail }, 422);
    const v = body.value;
    try {
      const state = await d.pause({
        retryAfterSeconds: v.retry_after_seconds,
        reason: v.reason,
        mode: v.mode,
        drain: v.drain,
        drainTimeoutMs: v.drain_timeout_seconds === undefined ? undefined : v.drain_timeout_seconds * 1000,
      });
      return c.json(state);
    } catch (error) {
      return c.json({ ...d.gate.state(), detail: (error as Error).message }, 408);
    }
  });
  app.post("/proxy/resume", async (c) => {
    const body = await jsonBody(c.req, ResumeBody);
    if (!body.ok) return c.json({ detail: body.detail }, 422);
    return c.json(await d.resume({ modelVersion: body.value.model_version }));
  });
  app.get("/proxy/state", (c) => c.json({ ...d.gate.state(), ...d.captureCounters() }));
  /**
   * Long-poll until nothing is in flight and every ended call's span is in the store (or `timeout`
   * seconds pass): `{drained, ...state}`. A remote algorithm calls it before reading spans.
   */
  app.post("/proxy/drain", async (c) => {
    const timeout = Number(c.req.query("timeout") ?? "30");
    if (!Number.isFinite(timeout) || timeout < 0)
      return c.json({ detail: "timeout must be >= 0 seconds" }, 422);
    try {
      await d.gate.drain(timeout * 1000);
      await d.flush();
      return c.json({ drained: true, ...d.gate.state() });
    } catch {
      return c.json({ drained: false, ...d.gate.state() });
    }
  });
  app.post("/proxy/tokens", async (c) => {
    const body = await jsonBody(c.req, TokenBody);
    if (!body.ok) return c.json({ detail: body.detail }, 422);
    const v = body.value;
    // Absent: the default lifetime; an explicit null: a token that never expires (its attempt's end still ends it).
    const ttl = v.ttl_seconds === undefined ? {} : { ttlSeconds: v.ttl_seconds };
    const token = d.mintAttemptToken(v.rollout_id, v.attempt_id, ttl);
    return c.json({ token, rollout_id: v.rollout_id, attempt_id: v.attempt_id }, 201);
  });

  // verl PR #83 session API. Creating and deleting are trainer operations (admin); an attempt token may
  // read and complete its own session only.
  const sessionAccess = (c: any, sessionId: string, write: boolean): Response | null => {
    const p = d.auth.identify(c.env.incoming.headers);
    if (d.auth.isAdmin(c.env.incoming.headers)) return null;
    if (write || p.kind !== "attempt")
      return c.json({ detail: "Invalid or missing API key" }, p.kind === "attempt" ? 403 : 401);
    const s = d.sessions.get(sessionId);
    if (s && (s.rollout_id !== p.rolloutId || s.attempt_id !== p.attemptId)) {
      return c.json({ detail: "this token is scoped to another rollout attempt" }, 403);
    }
    return null;
  };
  app.post("/sessions/:id", async (c) => {
    const id = c.req.param("id");
    const denied = sessionAccess(c, id, true);
    if (denied) return denied;
    const body = await jsonBody(c.req, SessionBody);
    if (!body.ok) return c.json({ detail: body.detail }, 422);
    const s = d.sessions.create(id, { rolloutId: body.value.rollout_id, attemptId: body.value.attempt_id });
    return c.json({
      session_id: s.session_id,
      status: "created",
      rollout_id: s.rollout_id,
      attempt_id: s.attempt_id,
    });
  });
  app.get("/sessions/:id", (c) => {
    const id = c.req.param("id");
    const denied = sessionAccess(c, id, false);
    if (denied) return denied;
    const s = d.sessions.get(id);
    return s ? c.json(s) : c.json({ detail: `Session ${id} not found` }, 404);
  });
  app.post("/sessions/:id/complete", (c) => {
    const id = c.req.param("id");
    const denied = sessionAccess(c, id, false);
    if (denied) return denied;
    const s = d.sessions.complete(id);
    return s
      ? c.json({ session_id: id, status: "completed" })
      : c.json({ detail: `Session ${id} not found` }, 404);
  });
  app.delete("/sessions/:id", (c) => {
    const id = c.req.param("id");
    const denied = sessionAccess(c, id, true);
    if (denied) return denied;
    d.sessions.delete(id);
    return c.json({ session_id: id, status: "deleted" });
  });

  app.notFound((c) => c.json({ detail: "Not Found" }, 404));
  app.onError((error, c) => c.json({ detail: error.message }, 500));
  return app;
}
