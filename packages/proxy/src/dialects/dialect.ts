import type { Attributes } from "@agl/core";
import type { z } from "zod";

/**
 * A client API the proxy serves by translation to the upstream's chat/completions (`/v1/responses`,
 * `/v1/messages`). The upstream call, its token ids, the span and its triplets are those of a chat call;
 * only what the client sends and receives is in the dialect's wire format.
 */
export interface ClientDialect {
  readonly api: "responses" | "messages";
  /** The client's answer for a finished (non-streamed) upstream call: the chat body re-encoded. */
  translateResponse(status: number, upstream: Buffer, contentType: string): TranslatedResponse;
  /** A per-call stream encoder fed the upstream's chat SSE bytes. */
  createStream(): DialectStream;
  /** An error body in the dialect's format (proxy-side failures: 400, 502, 504). */
  errorBody(status: number, message: string): unknown;
  /** Attributes for the call's span once it has answered (the Responses state); null for none. */
  spanAttributes?(): Attributes | null;
}

export interface TranslatedResponse {
  status: number;
  body: Buffer;
}

/** Re-encodes an upstream chat SSE stream as the dialect's events; each call returns whole events. */
export interface DialectStream {
  push(chunk: Buffer): string;
  /** The upstream stream ended; closes the client stream (a failure event if it never finished). */
  end(): string;
  /** The upstream failed mid-stream: the dialect's error event. */
  fail(message: string): string;
}

/** A request the dialect could not translate: a 400 naming the field. */
export class DialectRequestError extends Error {
  constructor(
    readonly param: string,
    message: string,
  ) {
    super(message);
    this.name = "DialectRequestError";
  }
}

/** `event: <type>\ndata: <json>\n\n`, as both the Responses API and Anthropic stream. */
export const sseEvent = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;

/** Collects the events a dialect stream emits while handling one upstream chunk. */
export abstract class SseEncoder {
  private out = "";

  protected write(type: string, data: Record<string, unknown>): void {
    this.out += sseEvent(type, { type, ...data });
  }

  /** The events emitted since the last call. */
  protected take(): string {
    const s = this.out;
    this.out = "";
    return s;
  }
}

/** A message's text: a string, or the concatenated text of its content parts. */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content))
    return content === undefined || content === null ? "" : JSON.stringify(content);
  return content
    .map((p: any) => (typeof p === "string" ? p : typeof p?.text === "string" ? p.text : ""))
    .join("");
}

/** Parse a tool call's JSON arguments; malformed model output stays visible as the raw string. */
export function parseArguments(args: string): unknown {
  if (args.trim() === "") return {};
  try {
    return JSON.parse(args);
  } catch {
    return { _raw: args };
  }
}

export function randomId(prefix: string): string {
  return `${prefix}_${crypto.randomUUID().replaceAll("-", "")}`;
}

/** The upstream's JSON answer, or null when it sent something else. */
export function parseUpstreamJson(upstream: Buffer, contentType: string): any {
  if (!contentType.includes("json")) return null;
  try {
    return JSON.parse(upstream.toString("utf8"));
  } catch {
    return null;
  }
}

/** Choice 0 of a chat answer (the Responses and Messages APIs have no `n`). */
export const choiceZero = (chat: any): any =>
  Array.isArray(chat?.choices) ? chat.choices.find((c: any) => (c?.index ?? 0) === 0) : undefined;

/** `value` checked against `schema`; a DialectRequestError naming the first bad field (`path.sub.field`). */
export function parseAt<S extends z.ZodType>(schema: S, value: unknown, path: string): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const where = [path, ...issue.path.map(String)].filter(Boolean).join(".") || "body";
  throw new DialectRequestError(where, `${where}: ${issue.message}`);
}

/**
 * Hosted features outside `tools` (run on the vendor's servers, e.g. Responses `background`, Anthropic
 * `mcp_servers`): a 400 naming the field, as for hosted tools, since ignoring one silently changes what the
 * call means (`conversation` would drop its history). `inUse` says whether a value asks for the feature.
 */
export function rejectHostedFields(
  body: Record<string, unknown>,
  fields: Record<string, (value: unknown) => boolean>,
): void {
  for (const [field, inUse] of Object.entries(fields)) {
    if (inUse(body[field])) {
      throw new DialectRequestError(
        field,
        `${field}: a hosted feature the model behind this proxy cannot serve (it runs on the API vendor's servers)`,
      );
    }
  }
}

/** A value that asks for something: not absent, null, false or empty. */
export const given = (v: unknown): boolean =>
  v !== undefined && v !== null && v !== false && !(Array.isArray(v) && v.length === 0);
