import { MAX_SPAN_SEQUENCE_ID } from "@agl/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { jsonLinesLogger } from "../logging.js";
import { ExportTraceServiceRequest, ExportTraceServiceResponse } from "../otlp/proto.js";
import { type Harness, harness } from "./helpers.js";

/**
 * One bad span never loses the rest of its OTLP request: text no backend can hold is stored sanitised,
 * a span that must be refused is refused alone, with OTLP's `partial_success` (`rejected_spans` and an
 * `error_message`, in both the protobuf and the JSON encoding) and a warn line naming the reason and
 * the rollout/attempt ids.
 */

let h: Harness;
let logs: Array<Record<string, any>>;
beforeEach(async () => {
  logs = [];
  h = await harness({ logger: jsonLinesLogger((l) => logs.push(JSON.parse(l))) });
});
afterEach(async () => {
  await h.close();
});

const str = (key: string, value: string) => ({ key, value: { stringValue: value } });
const int = (key: string, value: number) => ({ key, value: { intValue: String(value) } });

let spanCounter = 0;
function span(name: string, attributes: unknown[]) {
  spanCounter++;
  return {
    traceId: "0123456789abcdef0123456789abcdef",
    spanId: spanCounter.toString(16).padStart(16, "0"),
    name,
    attributes,
  };
}

/** One request: spans of a good attempt, with one bad span of each kind in between. */
async function mixedRequest(withDeep: boolean) {
  const r = await h.store.startRollout({ input: 1 });
  const ids = (rid = r.rollout_id, aid = r.attempt.attempt_id) => [
    str("agentlightning.rollout_id", rid),
    str("agentlightning.attempt_id", aid),
  ];
  let deep: unknown = { stringValue: "leaf" };
  for (let i = 0; i < 70; i++) deep = { kvlistValue: { values: [{ key: "k", value: deep }] } };
  const request = {
    resourceSpans: [
      {
        resource: { attributes: [str("service.name", "agent")] },
        scopeSpans: [
          {
            spans: [
              span("first", ids()),
              span("nul text", [...ids(), str("tool.output", "a\u0000b"), str("k\ud800", "v")]),
              span("bad rollout id", ids(`${r.rollout_id}\u0000`)),
              span("bad sequence id", [
                ...ids(),
                int("agentlightning.span_sequence_id", MAX_SPAN_SEQUENCE_ID + 1),
              ]),
              // Only JSON can carry it: protobuf decoders stop at 100 nested messages (~33 levels).
              ...(withDeep ? [span("too deep", [...ids(), { key: "deep", value: deep }])] : []),
              span("unknown attempt", ids(r.rollout_id, "at-nope")),
              span("no ids", []),
              span("last", ids()),
            ],
          },
        ],
      },
    ],
  };
  return { r, request };
}

/**
 * `surrogateKey`: what the key "k\ud800" arrives as. JSON carries the lone surrogate itself (sanitised to
 * one U+FFFD); protobufjs writes it as 3 invalid UTF-8 bytes, each decoded to U+FFFD.
 */
async function expectStoredAndLogged(rolloutId: string, withDeep: boolean, surrogateKey: string) {
  const stored = (await h.store.querySpans(rolloutId)).items;
  expect(stored.map((s) => s.name).sort()).toEqual(["first", "last", "nul text"]);
  expect(stored.find((s) => s.name === "nul text")!.attributes).toMatchObject({
    "tool.output": "a\uFFFDb",
    [surrogateKey]: "v",
    "agl.sanitized": true,
  });
  const refused = logs.filter((l) => l.msg === "otlp spans refused");
  expect(refused.every((l) => l.level === "warn")).toBe(true);
  const byReason = (re: RegExp) => refused.find((l) => re.test(l.reason));
  expect(byReason(/^rollout_id must not contain control characters/)).toMatchObject({
    rollout_id: `${rolloutId}\u0000`,
    spans: 1,
  });
  expect(byReason(/^sequence_id must be an integer/)).toMatchObject({ rollout_id: rolloutId, spans: 1 });
  if (withDeep)
    expect(byReason(/attributes.*nest deeper/)).toMatchObject({ rollout_id: rolloutId, spans: 1 });
  expect(byReason(/^unknown rollout or attempt/)).toMatchObject({
    rollout_id: rolloutId,
    attempt_id: "at-nope",
    spans: 1,
  });
  expect(byReason(/no agentlightning\.rollout_id/)).toMatchObject({
    rollout_id: null,
    attempt_id: null,
    spans: 1,
  });
  expect(refused).toHaveLength(withDeep ? 5 : 4);
}

describe("OTLP partial success", () => {
  it("protobuf: stores the good and the sanitised spans, refuses the bad ones alone", async () => {
    const { r, request } = await mixedRequest(false);
    const body = ExportTraceServiceRequest.encode(ExportTraceServiceRequest.fromObject(request)).finish();
    const res = await fetch(`${h.server.url}/v1/traces`, {
      method: "POST",
      headers: { "content-type": "application/x-protobuf" },
      body: new Uint8Array(body),
    });
    expect(res.status).toBe(200);
    const answer = ExportTraceServiceResponse.toObject(
      ExportTraceServiceResponse.decode(new Uint8Array(await res.arrayBuffer())),
      { longs: Number },
    ) as { partialSuccess: { rejectedSpans: number; errorMessage: string } };
    expect(answer.partialSuccess.rejectedSpans).toBe(4);
    expect(answer.partialSuccess.errorMessage).toMatch(/^4 span\(s\) rejected: /);
    expect(answer.partialSuccess.errorMessage).toMatch(/1 span\(s\) stored with U\+0000 or lone surrogates/);
    await expectStoredAndLogged(r.rollout_id, false, "k\uFFFD\uFFFD\uFFFD");
  });

  it("JSON: the same, with rejectedSpans as an int64 string", async () => {
    const { r, request } = await mixedRequest(true);
    const res = await h.call("POST", "/v1/traces", request, { "content-type": "application/json" });
    expect(res.status).toBe(200);
    expect(res.body.partialSuccess.rejectedSpans).toBe("5");
    expect(res.body.partialSuccess.errorMessage).toMatch(/nest deeper/);
    await expectStoredAndLogged(r.rollout_id, true, "k\uFFFD");
  });

  it("a fully accepted request with nothing sanitised has no partial_success and logs no warn", async () => {
    const r = await h.store.startRollout({ input: 1 });
    const request = {
      resourceSpans: [
        {
          resource: {
            attributes: [
              str("agentlightning.rollout_id", r.rollout_id),
              str("agentlightning.attempt_id", r.attempt.attempt_id),
            ],
          },
          scopeSpans: [{ spans: [span("a", []), span("b", [])] }],
        },
      ],
    };
    const res = await h.call("POST", "/v1/traces", request, { "content-type": "application/json" });
    expect([res.status, res.body]).toEqual([200, {}]);
    const proto = await fetch(`${h.server.url}/v1/traces`, {
      method: "POST",
      headers: { "content-type": "application/x-protobuf" },
      body: new Uint8Array(
        ExportTraceServiceRequest.encode(ExportTraceServiceRequest.fromObject(request)).finish(),
      ),
    });
    expect(new Uint8Array(await proto.arrayBuffer())).toHaveLength(0);
    expect(logs.filter((l) => l.level === "warn")).toEqual([]);
  });

  it("an unreadable body is still a 400, logged at warn with the reason", async () => {
    const res = await h.call("POST", "/v1/traces", "{not json", { "content-type": "application/json" });
    expect(res.status).toBe(400);
    expect(logs.filter((l) => l.level === "warn")).toEqual([
      expect.objectContaining({
        msg: "otlp request refused",
        reason: expect.stringMatching(/Invalid OTLP json/),
      }),
    ]);
  });
});
