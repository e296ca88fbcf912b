/**
 * The LightningStore conformance suite (Agent Lightning v0.3 §10 "store/test_core" plus this port's
 * improvements: active watchdog, heartbeat liveness, typed illegal transitions, event-driven waits).
 * Every store (in-memory, SQLite, PostgreSQL, the HTTP client) runs the same suite:
 *
 *   describeStoreConformance("sqlite", async () => ({ store: await openStore(), cleanup }));
 *
 * Each test gets a fresh store from `factory` and closes it afterwards. Timing-dependent tests use
 * short real timeouts; `timeScale` stretches them for slow backends.
 */
import { describe } from "vitest";
import { inputRuleTests } from "./conformance/input-rules.js";
import { miscTests } from "./conformance/misc.js";
import { queryTests } from "./conformance/queries.js";
import { queueTests } from "./conformance/queue.js";
import { resourceAndWorkerTests } from "./conformance/resources-workers.js";
import { sanitizeTests } from "./conformance/sanitize.js";
import { spanTests } from "./conformance/spans.js";
import { statusTests } from "./conformance/status.js";
import { successTests } from "./conformance/success.js";
import { waitTests } from "./conformance/wait.js";
import { watchdogTests } from "./conformance/watchdog.js";
import type { StoreFactory } from "./helpers.js";

export interface StoreConformanceOptions {
  /** Multiply every watchdog/wait duration (default 1: timeouts of 0.2-0.6 s). */
  timeScale?: number;
}

export function describeStoreConformance(
  name: string,
  factory: StoreFactory,
  options: StoreConformanceOptions = {},
): void {
  const scale = options.timeScale ?? 1;
  if (!(scale > 0) || !Number.isFinite(scale))
    throw new Error(`timeScale must be a positive number, got ${scale}`);
  describe(`LightningStore conformance: ${name}`, () => {
    queueTests(factory);
    statusTests(factory);
    successTests(factory);
    watchdogTests(factory, scale);
    spanTests(factory);
    queryTests(factory);
    resourceAndWorkerTests(factory);
    waitTests(factory, scale);
    miscTests(factory);
    inputRuleTests(factory);
    sanitizeTests(factory);
  });
}
