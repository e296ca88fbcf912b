import type { IncomingMessage, ServerResponse } from "node:http";

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

export const openaiError = (
  message: string,
  type: string,
  code: string | null = null,
  param: string | null = null,
) => ({ error: { message, type, param, code } });

/** How much of an over-limit body is read (and discarded) so the client gets to read the 413. */
export const DRAIN_BYTES = 64 * 1024 * 1024;

/**
 * Answer 413 once the client has sent its body, discarding it (up to {@link DRAIN_BYTES} more): a client
 * still writing when the server closes gets EPIPE/ECONNRESET instead of the answer (plain `fetch` did,
 * most of the time). A body beyond that bound is answered at once and its connection closed.
 */
export function refuseBody(req: IncomingMessage, res: ServerResponse, body: unknown, alreadyRead = 0): void {
  let seen = alreadyRead;
  let answered = false;
  const answer = () => {
    if (answered) return;
    answered = true;
    sendJson(res, 413, body, { connection: "close" });
  };
  if (req.complete) {
    answer();
    return;
  }
  req.on("data", (c: Buffer) => {
    seen += c.length;
    if (seen > DRAIN_BYTES && !answered) {
      answer();
      res.once("finish", () => req.destroy());
    }
  });
  req.once("end", answer);
  req.once("error", () => res.destroy());
  req.resume();
}

/** The request body, or null after answering 413 (over `limit`, with `tooLarge` as the body) or on a broken upload. */
export function readBody(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  tooLarge: unknown = openaiError(`request body over ${limit} bytes`, "invalid_request_error"),
): Promise<Buffer | null> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) {
    refuseBody(req, res, tooLarge);
    return Promise.resolve(null);
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.off("data", onData);
        req.off("end", onEnd);
        chunks.length = 0;
        refuseBody(req, res, tooLarge, size);
        resolve(null);
        return;
      }
      chunks.push(c);
    };
    const onEnd = () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", () => resolve(null));
  });
}

export const header = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
