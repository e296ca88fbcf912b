import { z } from "zod";

/**
 * The relay protocol on `/ws/worker`: JSON text frames. A worker dials out to the proxy (authenticated by
 * `Authorization: Bearer <worker token>` on the upgrade), says `hello` with the models it serves, and the
 * proxy answers `welcome`. The proxy then sends `request`s; the worker answers each with `start` (status
 * and headers), `data` (body text, in order) and `end`, or `error`; a non-streamed answer comes whole as
 * one `start` frame with `body`. `cancel` aborts a request (the client
 * left or the proxy retried elsewhere); `pause`/`resume` pass a slow client's backpressure on.
 */
export const RELAY_PROTOCOL_VERSION = 1;

export const WorkerMessageSchema = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("hello"),
    protocol: z.literal(RELAY_PROTOCOL_VERSION),
    worker_id: z.string().min(1).max(200),
    models: z.array(z.string().min(1)).max(1000),
  }),
  z.object({
    type: z.literal("start"),
    id: z.number().int().nonnegative(),
    status: z.number().int().min(100).max(599),
    headers: z.record(z.string(), z.string()),
    /** A whole (non-streamed) body in the same frame: one frame per answer instead of three. */
    body: z.string().optional(),
  }),
  z.object({ type: z.literal("data"), id: z.number().int().nonnegative(), data: z.string() }),
  z.object({ type: z.literal("end"), id: z.number().int().nonnegative() }),
  z.object({ type: z.literal("error"), id: z.number().int().nonnegative(), message: z.string() }),
]);
export type WorkerMessage = z.output<typeof WorkerMessageSchema>;

export type ProxyMessage =
  | { type: "welcome"; worker_id: string }
  | {
      type: "request";
      id: number;
      method: "GET" | "POST";
      /** Below the engine's `/v1`, e.g. `chat/completions`. */
      path: string;
      accept: string;
      body: string | null;
    }
  | { type: "cancel"; id: number }
  | { type: "pause"; id: number }
  | { type: "resume"; id: number };

export const ProxyMessageSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("welcome"), worker_id: z.string() }),
  z.object({
    type: z.literal("request"),
    id: z.number().int().nonnegative(),
    method: z.enum(["GET", "POST"]),
    path: z.string().regex(/^[a-z0-9/_-]+$/i, "a path below /v1"),
    accept: z.string(),
    body: z.string().nullable(),
  }),
  z.object({ type: z.literal("cancel"), id: z.number().int().nonnegative() }),
  z.object({ type: z.literal("pause"), id: z.number().int().nonnegative() }),
  z.object({ type: z.literal("resume"), id: z.number().int().nonnegative() }),
]);

/** A JSON frame checked against a schema; null for anything else. */
export function decodeFrame<S extends z.ZodType>(schema: S, data: unknown): z.output<S> | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(String(data));
  } catch {
    return null;
  }
  const r = schema.safeParse(parsed);
  return r.success ? r.data : null;
}
