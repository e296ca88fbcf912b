import { buildCallSpan, type CallRecord, type CaptureOptions } from "./capture.js";
import type { ProxyLogger } from "./options.js";
import { type SessionRegistry, turnFromCall } from "./sessions.js";
import type { SpanWriter } from "./span-writer.js";

/**
 * A call being recorded. The sequence id is filled in once the store hands it out; a non-streamed
 * response is kept as bytes and parsed only when the span is built, after the client has its answer.
 */
export interface PendingCall extends CallRecord {
  responseBytes: Buffer | null;
  responseIsJson: boolean;
}

/** What capture has done since start (`GET /proxy/state`): a span the store rejects is never silent. */
export interface CaptureCounters {
  spans_recorded: number;
  spans_failed: number;
  last_span_error: string | null;
}

/** Builds and writes spans off the critical path, counting and logging every span that is lost. */
export class CallRecorder {
  /** Span writes not yet settled; stop() and flush() wait for them. */
  readonly pendingWrites = new Set<Promise<unknown>>();
  private readonly warned = new Set<string>();
  private recorded = 0;
  private failed = 0;
  private lastError: string | null = null;

  constructor(
    private readonly writer: SpanWriter,
    private readonly sessions: SessionRegistry,
    private readonly capture: CaptureOptions,
    private readonly log: ProxyLogger,
  ) {}

  counters(): CaptureCounters {
    return { spans_recorded: this.recorded, spans_failed: this.failed, last_span_error: this.lastError };
  }

  /** Record the call once it has ended; `seq` is the sequence id allocated while the upstream worked. */
  record(call: PendingCall, seq: Promise<number | null>): void {
    // Start on the next macrotask: `res.end()` hands the answer to the socket on the next tick, and
    // microtasks (an `await` here) run before that, so parsing and building the span in one would delay
    // the client's answer by that CPU time (measured ~0.25 ms p50 behind a 20 ms upstream).
    const write = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.write(call, seq))
      .finally(() => this.pendingWrites.delete(write));
    this.pendingWrites.add(write);
  }

  warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.log.warn(message);
  }

  private async write(call: PendingCall, seq: Promise<number | null>): Promise<void> {
    let error: string | null;
    try {
      const sequenceId = await seq;
      if (sequenceId === null) {
        error = "no sequence id (the store failed)";
      } else {
        call.sequenceId = sequenceId;
        parseResponse(call);
        const span = buildCallSpan(call, this.capture);
        if (span.attributes?.["agl.proxy.token_ids_missing"] === true) {
          this.warnOnce(
            `no-ids:${call.backend}`,
            `backend ${call.backend} returned no token ids (is it vLLM >= 0.10.2?); calls are recorded and flagged agl.proxy.token_ids_missing`,
          );
        }
        if (call.sessionId && call.isChat && call.response) {
          this.sessions.resolve(call.sessionId).turns.push(turnFromCall(call.request, call.response));
        }
        error = await this.writer.write(span);
      }
    } catch (e) {
      error = (e as Error).message;
    }
    if (error === null) {
      this.recorded++;
      return;
    }
    this.failed++;
    this.lastError = `${call.rolloutId}/${call.attemptId}: ${error}`;
    this.log.error(`recording a span for ${this.lastError}`);
  }
}

/** Parse a non-streamed response now that nobody waits for it (streams were assembled as they came). */
function parseResponse(call: PendingCall): void {
  const bytes = call.responseBytes;
  if (bytes === null) return;
  call.responseBytes = null;
  call.rawResponse = bytes.toString("utf8");
  if (!call.responseIsJson) return;
  try {
    call.response = JSON.parse(call.rawResponse);
  } catch {
    // the client already has the bytes; the span says why it has no parsed response
    call.error ??= "upstream response is not valid JSON";
  }
}
