/**
 * The store server's request log. A line per request at info cost the server ~10% of its CPU per
 * rollout (6 requests each: serialising, the logger's redaction, the write), so answered requests
 * (status below 400) are logged one by one only at debug, and at info as a summary every
 * `summaryMs`: how many, by status, mean and longest duration. Every 4xx and 5xx keeps its own line
 * at info (a refusal to a client that cannot show it is also warned about, with its reason, in
 * refusals.ts), so nothing refused goes unlogged.
 */
import type { StoreServerLogger } from "./logging.js";

export const DEFAULT_REQUEST_SUMMARY_MS = 60_000;

export class RequestLog {
  private count = 0;
  private totalMs = 0;
  private maxMs = 0;
  private statuses: Record<string, number> = {};
  private windowStart: number;

  constructor(
    private readonly logger: StoreServerLogger,
    private readonly summaryMs = DEFAULT_REQUEST_SUMMARY_MS,
    private readonly now: () => number = performance.now.bind(performance),
  ) {
    this.windowStart = this.now();
  }

  /** One answered request. */
  record(method: string, path: string, status: number, durationMs: number): void {
    const duration_ms = Math.round(durationMs * 100) / 100;
    if (status >= 400) this.logger.info("request", { method, path, status, duration_ms });
    else this.logger.debug?.("request", { method, path, status, duration_ms });
    this.count++;
    this.totalMs += durationMs;
    if (durationMs > this.maxMs) this.maxMs = durationMs;
    this.statuses[status] = (this.statuses[status] ?? 0) + 1;
    if (this.now() - this.windowStart >= this.summaryMs) this.flush();
  }

  /** Log the summary of the requests since the last one (none: no line), and start a new window. */
  flush(): void {
    const now = this.now();
    if (this.count > 0) {
      this.logger.info("requests", {
        count: this.count,
        statuses: this.statuses,
        mean_ms: Math.round((this.totalMs / this.count) * 100) / 100,
        max_ms: Math.round(this.maxMs * 100) / 100,
        window_s: Math.round(now - this.windowStart) / 1000,
      });
    }
    this.count = 0;
    this.totalMs = 0;
    this.maxMs = 0;
    this.statuses = {};
    this.windowStart = now;
  }
}
