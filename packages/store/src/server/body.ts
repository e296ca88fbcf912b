import type { IncomingMessage } from "node:http";
import { jsonNestsDeeperThan, MAX_BODY_NESTING_DEPTH, NESTING_SCAN_MIN_LENGTH } from "@agl/core";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";

const CLIENT_ABORTED = Symbol.for("agl.store.ClientAbortedError");

/** The client closed the connection before its request body arrived: logged as info, never as a server error. */
export class ClientAbortedError extends HTTPException {
  protected readonly [CLIENT_ABORTED] = true;
  constructor() {
    super(400, { message: "request aborted by the client" });
    this.name = "ClientAbortedError";
  }
  static isInstance(error: unknown): error is ClientAbortedError {
    return typeof error === "object" && error !== null && (error as any)[CLIENT_ABORTED] === true;
  }
}

/**
 * The request body size limit, reading the body once up front.
 *
 * On @hono/node-server the body is read straight from the node request into hono's body cache, so
 * `c.req.text()` / `c.req.arrayBuffer()` never build a web Request and ReadableStream: that
 * construction was the largest single server cost per store call (~0.15 ms of ~0.5 ms). Elsewhere
 * (app.fetch / app.request with a real Request) it is hono's own bodyLimit.
 */
export function limitBody(maxSize: number, onTooLarge: (c: Context) => Response): MiddlewareHandler {
  const fallback = bodyLimit({ maxSize, onError: onTooLarge });
  return async (c, next) => {
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    if (!incoming || typeof incoming.on !== "function") return fallback(c, next);
    if (c.req.method === "GET" || c.req.method === "HEAD") return next();
    const declared = incoming.headers["content-length"];
    if (declared !== undefined && Number(declared) > maxSize) return onTooLarge(c);
    const body = await readIncoming(incoming, maxSize);
    if (body === null) return onTooLarge(c);
    cacheBody(c, body);
    return next();
  };
}

/** The whole body, or null once it grows past maxSize (reading stops there). */
export function readIncoming(incoming: IncomingMessage, maxSize: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      incoming.off("data", onData);
      incoming.off("end", onEnd);
      incoming.off("error", onError);
      incoming.off("aborted", onAborted);
      incoming.off("close", onAborted);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxSize) {
        cleanup();
        incoming.pause();
        resolve(null);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error) => {
      cleanup();
      // A reset or aborted upload is the client going away, not a server fault.
      reject(
        incoming.destroyed || (error as { code?: string }).code === "ECONNRESET"
          ? new ClientAbortedError()
          : error,
      );
    };
    const onAborted = () => onError(new ClientAbortedError());
    incoming.on("data", onData);
    incoming.on("end", onEnd);
    incoming.on("error", onError);
    incoming.on("aborted", onAborted);
    // Closed before "end": the connection went away mid-upload.
    incoming.on("close", onAborted);
  });
}

/**
 * Seed hono's body cache with the one form the route reads: OTLP ingest reads bytes, every other
 * route reads JSON text. (Lazy getters for both forms cost two closures and defineProperty calls per
 * request.) hono derives any other form from the cached one, which is exact for UTF-8 JSON text.
 */
function cacheBody(c: Context, body: Buffer): void {
  const cache = c.req.bodyCache as Record<string, unknown>;
  if (c.req.path.startsWith("/v1/traces")) {
    cache.arrayBuffer = Promise.resolve(
      body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength),
    );
  } else {
    const { text, tooDeep } = jsonText(body);
    if (tooDeep !== undefined) depthScans.set(c.req.raw, tooDeep);
    cache.text = Promise.resolve(text);
  }
}

/**
 * A JSON body's bytes as text, scanned for depth first when large enough (`tooDeep` undefined: not
 * scanned). A body that nests too deep is never decoded (its text is ""): a 30 MB string is garbage
 * the heap keeps until its next full collection, which an idle server may not run for a long time.
 */
export function jsonText(body: Buffer): { text: string; tooDeep: boolean | undefined } {
  // Small bodies are not scanned (bodyNestsTooDeep's threshold) and cost no bookkeeping here.
  if (body.length < NESTING_SCAN_MIN_LENGTH) return { text: body.toString("utf8"), tooDeep: undefined };
  const tooDeep = jsonNestsDeeperThan(body, MAX_BODY_NESTING_DEPTH);
  return { text: tooDeep ? "" : body.toString("utf8"), tooDeep };
}

/** Requests whose JSON body was scanned for depth as it arrived: true when it nested too deep. */
const depthScans = new WeakMap<Request, boolean>();

/**
 * Whether the body nested deeper than MAX_BODY_NESTING_DEPTH (then it was never decoded: its text is
 * ""), or undefined when it was not scanned here (under the scan threshold, or app.request/app.fetch).
 */
export function bodyTooDeep(c: Context): boolean | undefined {
  return depthScans.get(c.req.raw);
}
