import { SanitizingSpanSchema } from "@agl/core";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type Harness, harness } from "./helpers.js";

const API = "/v1/agl";

let h: Harness;
let rid: string;
let aid: string;
beforeEach(async () => {
  h = await harness();
  const started = await h.call("POST", `${API}/rollouts`, { input: 1 });
  rid = started.body.rollout_id;
  aid = started.body.attempt.attempt_id;
});
afterEach(async () => {
  vi.restoreAllMocks();
  await h.close();
});

/** The Python client's add_span body: the full pydantic Span dump, every field present. */
const fullDump = (seq: number, attributes: Record<string, unknown> = { "llm.model": "m" }) => ({
  rollout_id: rid,
  attempt_id: aid,
  sequence_id: seq,
  trace_id: "0af7651916cd43dd8448eb211c80319c",
  span_id: seq.toString(16).padStart(16, "0"),
  parent_id: null,
  name: "llm.call",
  status: { status_code: "OK", description: null },
  attributes,
  events: [],
  links: [],
  start_time: 1.5,
  end_time: 2.5,
  context: {
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    span_id: "00000000000000aa",
    is_remote: false,
    trace_state: {},
  },
  parent: null,
  resource: { attributes: {}, schema_url: "" },
});

/** Only the required fields: the schema fills the rest. */
const partialSpan = (seq: number) => ({
  rollout_id: rid,
  attempt_id: aid,
  sequence_id: seq,
  trace_id: "t",
  span_id: `s${seq}`,
  name: "n",
});

describe("POST /spans: complete spans skip the schema, everything else still goes through it", () => {
  it("a complete, valid span is stored as the schema would have returned it, without running the schema", async () => {
    const body = fullDump(1);
    const expected = SanitizingSpanSchema.parse(body);
    const parse = vi.spyOn(SanitizingSpanSchema, "safeParse");
    const res = await h.call("POST", `${API}/spans`, body);
    expect(res.status).toBe(201);
    expect(parse).not.toHaveBeenCalled();
    expect(res.body).toEqual(expected);
    expect((await h.store.querySpans(rid)).items).toEqual([expected]);
  });

  it("a span missing fields takes the schema's defaults", async () => {
    const parse = vi.spyOn(SanitizingSpanSchema, "safeParse");
    const res = await h.call("POST", `${API}/spans`, partialSpan(2));
    expect(res.status).toBe(201);
    expect(parse).toHaveBeenCalledTimes(1);
    expect(res.body).toMatchObject({
      parent_id: null,
      events: [],
      links: [],
      status: { status_code: "UNSET" },
    });
  });

  it("text no backend can hold is still sanitised and marked, not stored as is", async () => {
    const res = await h.call("POST", `${API}/spans`, fullDump(3, { note: "a\u0000b" }));
    expect(res.status).toBe(201);
    expect(res.body.attributes).toEqual({ note: "a\uFFFDb", "agl.sanitized": true });
  });

  it("an invalid span is refused naming the field, as before", async () => {
    const res = await h.call("POST", `${API}/spans`, fullDump(-1));
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(JSON.stringify(res.body)).toContain("sequence_id");
    expect((await h.store.querySpans(rid)).total).toBe(0);
  });
});

describe("POST /spans/batch: a batch of complete spans skips the schema, any other batch goes through it", () => {
  // The batch body's schema runs each span through SanitizingSpanSchema's own parse step.
  const spySpanSchema = () => vi.spyOn(SanitizingSpanSchema._zod, "run");

  it("complete, valid spans are stored as the schema would have returned them, without running it", async () => {
    const spans = [fullDump(1), fullDump(2, { note: "x".repeat(300) })];
    const expected = spans.map((s) => SanitizingSpanSchema.parse(s));
    const run = spySpanSchema();
    const res = await h.call("POST", `${API}/spans/batch`, { spans });
    expect(res.status).toBe(201);
    expect(run).not.toHaveBeenCalled();
    expect(res.body).toEqual(expected);
    expect((await h.store.querySpans(rid)).items).toEqual(expected);
  });

  it("one incomplete span sends the whole batch through the schema: defaults are filled", async () => {
    const run = spySpanSchema();
    const res = await h.call("POST", `${API}/spans/batch`, { spans: [fullDump(1), partialSpan(2)] });
    expect(res.status).toBe(201);
    expect(run).toHaveBeenCalled();
    expect(res.body[1]).toMatchObject({
      parent_id: null,
      events: [],
      links: [],
      status: { status_code: "UNSET" },
    });
    expect((await h.store.querySpans(rid)).total).toBe(2);
  });

  it("text no backend can hold is still sanitised and marked in a batch", async () => {
    const res = await h.call("POST", `${API}/spans/batch`, {
      spans: [fullDump(1), fullDump(2, { note: "a\u0000b" })],
    });
    expect(res.status).toBe(201);
    expect(res.body[0].attributes).toEqual({ "llm.model": "m" });
    expect(res.body[1].attributes).toEqual({ note: "a\uFFFDb", "agl.sanitized": true });
  });

  it("an invalid span is refused naming its index and field, and nothing of the batch is stored", async () => {
    const res = await h.call("POST", `${API}/spans/batch`, { spans: [fullDump(1), fullDump(-1)] });
    expect(res.status).toBe(422);
    expect(res.body.field).toBe("spans[1].sequence_id");
    expect((await h.store.querySpans(rid)).total).toBe(0);
  });

  it("a body without a spans array is refused naming `spans` (or the body, when it is no object)", async () => {
    const cases: Array<[unknown, string]> = [
      [{}, "spans"],
      [{ spans: fullDump(1) }, "spans"],
      [[fullDump(1)], ""],
    ];
    for (const [body, field] of cases) {
      const res = await h.call("POST", `${API}/spans/batch`, body);
      expect(res.status).toBe(422);
      expect(res.body.field).toBe(field);
    }
    expect((await h.store.querySpans(rid)).total).toBe(0);
  });
});
