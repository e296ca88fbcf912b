import type { IncomingMessage } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";

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
function readIncoming(incoming: IncomingMessage, maxSize: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      incoming.off("data", onData);
      incoming.off("end", onEnd);
      incoming.off("error", onError);
      incoming.off("aborted", onAborted);
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
      reject(error);
    };
    const onAborted = () => onError(new Error("request aborted by the client"));
    incoming.on("data", onData);
    incoming.on("end", onEnd);
    incoming.on("error", onError);
    incoming.on("aborted", onAborted);
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
    cache.text = Promise.resolve(body.toString("utf8"));
  }
}
