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

export const openaiError = (message: string, type: string, code: string | null = null) => ({
  error: { message, type, param: null, code },
});

/** The request body, or null after answering 413 (over `limit`) or on a broken upload. */
export function readBody(req: IncomingMessage, res: ServerResponse, limit: number): Promise<Buffer | null> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) {
    sendJson(res, 413, openaiError(`request body over ${limit} bytes`, "invalid_request_error"), {
      connection: "close",
    });
    req.resume();
    return Promise.resolve(null);
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        sendJson(res, 413, openaiError(`request body over ${limit} bytes`, "invalid_request_error"), {
          connection: "close",
        });
        req.destroy();
        resolve(null);
        return;
      }
      chunks.push(c);
    });
    req.once("end", () =>
      resolve(size > limit ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)),
    );
    req.once("error", () => resolve(null));
  });
}

export const header = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
