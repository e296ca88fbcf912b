/**
 * Over-deep JSON is refused before it is parsed, on every route that reads JSON (REST, legacy and
 * OTLP/JSON): a 30 MB body of nested arrays (under the 32 MiB body limit) used to cost over a gigabyte
 * of memory to parse before the depth rule refused it.
 */
import { MAX_BODY_NESTING_DEPTH, MAX_NESTING_DEPTH, MAX_OTLP_JSON_NESTING_DEPTH } from "@agl/core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type Harness, harness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await harness();
});
afterAll(async () => {
  await h.close();
});

const HALF = 15 * 1024 * 1024;
const deepArrays = () => "[".repeat(HALF) + "]".repeat(HALF);

function nested(depth: number): unknown {
  let value: unknown = "leaf";
  for (let i = 0; i < depth; i++) value = { k: value };
  return value;
}

describe("deep JSON bodies", () => {
  it("a 30 MB body of nested arrays is a 422 on REST routes without parsing it: memory stays bounded", async () => {
    const body = deepArrays();
    const before = process.memoryUsage().rss;
    for (const path of ["/v1/agl/queues/rollouts/enqueue", "/rollout"]) {
      const answer = await h.call("POST", path, body);
      expect(answer.status, path).toBe(422);
      expect(answer.body.detail).toContain(`deeper than ${MAX_BODY_NESTING_DEPTH} levels`);
    }
    // Parsing one such body took ~1.5 GB; the body text itself is 30 MB (and its copies in flight).
    expect(process.memoryUsage().rss - before).toBeLessThan(400 * 1024 * 1024);
    expect((await h.call("GET", "/v1/agl/health")).status).toBe(200);
  });

  it("the body is refused on its bytes: never decoded to a string, never parsed", async () => {
    const body = deepArrays();
    const decoded: number[] = [];
    const parsed: number[] = [];
    const decode = Buffer.prototype.toString;
    const parse = JSON.parse;
    const decodeSpy = vi.spyOn(Buffer.prototype, "toString").mockImplementation(function (
      this: Buffer,
      ...args: unknown[]
    ) {
      const text = decode.apply(this, args as Parameters<Buffer["toString"]>);
      decoded.push(text.length);
      return text;
    });
    const parseSpy = vi.spyOn(JSON, "parse").mockImplementation((text, reviver) => {
      parsed.push(String(text).length);
      return parse(text, reviver);
    });
    try {
      const answer = await h.call("POST", "/v1/agl/rollouts", body);
      expect(answer.status).toBe(422);
    } finally {
      decodeSpy.mockRestore();
      parseSpy.mockRestore();
    }
    // A 30 MB string is garbage the heap keeps until a full collection, which an idle server may not
    // run for a long time: the PostgreSQL server held 2.2 GB after its fuzz run this way.
    expect(decoded.filter((n) => n >= body.length / 2)).toEqual([]);
    expect(parsed.filter((n) => n >= body.length / 2)).toEqual([]);
  });

  it("four such bodies in parallel: all 422, the server keeps answering", async () => {
    const body = deepArrays();
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => h.call("POST", "/v1/agl/queues/rollouts/enqueue", body)),
    );
    expect(answers.map((a) => a.status)).toEqual([422, 422, 422, 422]);
    expect((await h.call("GET", "/v1/agl/health")).status).toBe(200);
  });

  it("OTLP/JSON: an over-deep export is a 400 before parsing; a storable depth still passes the scan", async () => {
    const otlp = await h.call("POST", "/v1/traces", deepArrays());
    expect(otlp.status).toBe(400);
    expect(otlp.body.message).toContain(`deeper than ${MAX_OTLP_JSON_NESTING_DEPTH} levels`);
    // A large body whose values nest as deep as the input rules allow is judged by those rules, not the scan.
    const r = await h.store.startRollout({ input: 1 });
    const pad = "x".repeat(100 * 1024);
    const ok = await h.call("POST", "/v1/agl/queues/rollouts/enqueue", {
      rollouts: [{ input: { pad, v: nested(MAX_NESTING_DEPTH - 1) } }],
    });
    expect(ok.status).toBe(201);
    const tooDeepValue = await h.call("POST", "/v1/agl/spans", {
      rollout_id: r.rollout_id,
      attempt_id: r.attempt.attempt_id,
      sequence_id: 1,
      trace_id: "0".repeat(32),
      span_id: "1".repeat(16),
      name: "s",
      attributes: { pad, deep: nested(MAX_NESTING_DEPTH + 5) },
    });
    expect(tooDeepValue.status).toBe(422);
    expect(tooDeepValue.body.field).toContain("attributes");
  });
});
