import type { ServerResponse } from "node:http";
import type { CallRecord } from "./capture.js";
import type { DialectStream } from "./dialects/index.js";
import { openaiError } from "./http-util.js";
import { StreamAssembler } from "./stream-assembler.js";
import { isTimeoutError, type UpstreamCall } from "./upstream.js";

const now = () => performance.timeOrigin + performance.now();

/** Relay bytes as they arrive (no re-serialisation) while a parser rebuilds the response on the side. */
export function relayStream(
  call: UpstreamCall,
  status: number,
  res: ServerResponse,
  isChat: boolean,
  record: Omit<CallRecord, "sequenceId"> | null,
  timeoutMs: number,
  keepAliveMs = 0,
  /** Re-encodes the chat stream for a client of another API; null relays the bytes as they are. */
  dialect: DialectStream | null = null,
): Promise<void> {
  res.writeHead(status, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  res.flushHeaders();
  const assembler = record ? new StreamAssembler(isChat) : null;
  const startedAt = performance.now();
  return new Promise<void>((resolve) => {
    let finished = false;
    // SSE comments keep idle-killing intermediaries (and impatient clients) from dropping a slow stream;
    // they go out only between events, never inside one the upstream has half sent
    let atEventBoundary = true;
    let lastByte = 10;
    let lastWriteAt = performance.now();
    const keepAlive =
      keepAliveMs > 0
        ? setInterval(() => {
            if (performance.now() - lastWriteAt < keepAliveMs || !atEventBoundary || res.destroyed) return;
            res.write(": keepalive\n\n");
            lastWriteAt = performance.now();
          }, keepAliveMs / 2)
        : null;
    keepAlive?.unref();
    const finish = (error: string | null) => {
      if (finished) return;
      finished = true;
      if (keepAlive) clearInterval(keepAlive);
      const clientGone = res.destroyed && !res.writableFinished;
      if (dialect && !clientGone && !res.writableEnded) {
        res.end(error ? dialect.fail(error) : dialect.end());
      } else if (error && !clientGone && !res.writableEnded) {
        // an SSE error event makes the SDK throw instead of accepting a silently truncated answer
        res.end(`data: ${JSON.stringify(openaiError(error, "upstream_error"))}\n\n`);
      } else if (!res.writableEnded) {
        res.end();
      }
      if (record && assembler) {
        record.endMs = now();
        record.httpStatus = status;
        record.response = assembler.result() as Record<string, any>;
        record.ttftMs = assembler.firstChunkAt === null ? null : assembler.firstChunkAt - startedAt;
        const incomplete = !assembler.done;
        record.partial = clientGone || incomplete;
        if (clientGone) record.error = "client disconnected";
        else if (assembler.upstreamError)
          record.error = `upstream stream error: ${JSON.stringify(assembler.upstreamError)}`;
        else if (error) record.error = error;
        else if (incomplete) record.error = "stream ended without [DONE]";
      }
      resolve();
    };
    res.once("close", () => {
      if (!res.writableFinished) {
        call.abort(new Error("client disconnected"));
        finish(null);
      }
    });
    res.on("drain", () => call.resume());
    call.attach({
      onData: (chunk) => {
        lastWriteAt = performance.now();
        const n = chunk.length;
        if (n > 0) {
          // an event ends with a blank line: "\n\n" (or "\r\n\r\n"), possibly split across chunks
          const before = n >= 2 ? chunk[n - 2] : lastByte;
          atEventBoundary =
            chunk[n - 1] === 10 && (before === 10 || (before === 13 && n >= 3 && chunk[n - 3] === 10));
          lastByte = chunk[n - 1]!;
        }
        if (dialect) {
          // the dialect writes whole events only
          atEventBoundary = true;
          const events = dialect.push(chunk);
          if (events && !res.destroyed && !res.write(events)) call.pause();
        } else if (!res.destroyed && !res.write(chunk)) call.pause();
        assembler?.push(chunk);
      },
      onEnd: () => finish(null),
      onError: (e) =>
        finish(
          isTimeoutError(e)
            ? `upstream stream stalled for ${timeoutMs} ms`
            : `upstream connection lost mid-stream: ${e.message}`,
        ),
    });
  });
}
