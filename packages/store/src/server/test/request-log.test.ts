import { describe, expect, it } from "vitest";
import type { StoreServerLogger } from "../logging.js";
import { RequestLog } from "../request-log.js";

function recording(withDebug: boolean) {
  const lines: Array<{ level: string; msg: string; fields?: Record<string, unknown> }> = [];
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    lines.push({ level, msg, fields });
  const logger: StoreServerLogger = {
    ...(withDebug ? { debug: at("debug") } : {}),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
  };
  return { logger, lines };
}

describe("RequestLog", () => {
  it("summarises each window at info once it is over, counting every status", () => {
    const { logger, lines } = recording(false);
    let now = 0;
    const log = new RequestLog(logger, 1000, () => now);
    log.record("POST", "/v1/agl/spans", 200, 2);
    now = 400;
    log.record("POST", "/v1/agl/spans", 200, 4);
    log.record("GET", "/v1/agl/rollouts/x", 404, 1);
    // A refusal is logged on its own; answered requests are not (no debug on this logger).
    expect(lines).toEqual([
      {
        level: "info",
        msg: "request",
        fields: { method: "GET", path: "/v1/agl/rollouts/x", status: 404, duration_ms: 1 },
      },
    ]);
    now = 1000;
    log.record("POST", "/v1/agl/spans", 500, 9);
    expect(lines.filter((l) => l.msg === "requests")).toEqual([
      {
        level: "info",
        msg: "requests",
        fields: { count: 4, statuses: { "200": 2, "404": 1, "500": 1 }, mean_ms: 4, max_ms: 9, window_s: 1 },
      },
    ]);
    // A new window starts empty: flushing it at once logs nothing more.
    log.flush();
    expect(lines.filter((l) => l.msg === "requests")).toHaveLength(1);
    now = 1500;
    log.record("GET", "/v1/agl/health", 200, 1);
    log.flush();
    expect(lines.filter((l) => l.msg === "requests").at(-1)?.fields).toMatchObject({
      count: 1,
      statuses: { "200": 1 },
      window_s: 0.5,
    });
  });

  it("logs every request at debug when the logger has debug", () => {
    const { logger, lines } = recording(true);
    const log = new RequestLog(logger, 60_000, () => 0);
    log.record("POST", "/v1/agl/rollouts", 200, 1.234);
    log.record("POST", "/v1/agl/rollouts", 422, 0.5);
    expect(lines).toEqual([
      {
        level: "debug",
        msg: "request",
        fields: { method: "POST", path: "/v1/agl/rollouts", status: 200, duration_ms: 1.23 },
      },
      {
        level: "info",
        msg: "request",
        fields: { method: "POST", path: "/v1/agl/rollouts", status: 422, duration_ms: 0.5 },
      },
    ]);
  });
});
