import { gzipSync } from "node:zlib";
import { ROOT_CONTEXT, SpanStatusCode, trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { jsonLinesLogger } from "../logging.js";
import { ExportTraceServiceResponse, RpcStatus } from "../otlp/proto.js";
import { type Harness, harness } from "./helpers.js";

let h: Harness;
let logs: any[];
beforeEach(async () => {
  logs = [];
  h = await harness({ token: "tok", logger: jsonLinesLogger((l) => logs.push(JSON.parse(l))) });
});
afterEach(async () => {
  await h.close();
});

/** Record spans with the real SDK under `resourceAttrs`; `build` creates them with a tracer. */
function recordSpans(
  resourceAttrs: Record<string, string | number>,
  build: (tracer: ReturnType<BasicTracerProvider["getTracer"]>) => void,
): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "agent", ...resourceAttrs }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  build(provider.getTracer("agl-test"));
  return memory.getFinishedSpans();
}

function exportWith(exporter: OTLPTraceExporter, spans: ReadableSpan[]): Promise<number> {
  return new Promise((resolve) => exporter.export(spans, (result) => resolve(result.code)));
}

describe("POST /v1/traces with the real @opentelemetry/exporter-trace-otlp-proto", () => {
  for (const compression of ["gzip", "none"] as const) {
    it(`stores exported spans (${compression}): ids from span then resource, seq allocated, fields converted`, async () => {
      const a = (await h.store.startRollout({ input: 1 })).attempt;
      const b = (await h.store.startRollout({ input: 2 })).attempt;
      const spans = recordSpans(
        { "agentlightning.rollout_id": a.rollout_id, "agentlightning.attempt_id": a.attempt_id },
        (tracer) => {
          const root = tracer.startSpan("root", {
            attributes: { task: "sum", n: 3, ok: true, tags: ["a", "b"] },
          });
          const child = tracer.startSpan(
            "llm",
            { attributes: { "agentlightning.span_sequence_id": 42 } },
            trace.setSpan(ROOT_CONTEXT, root),
          );
          child.addEvent("token", { index: 1 });
          child.setStatus({ code: SpanStatusCode.ERROR, message: "bad" });
          child.end();
          root.addLink({ context: child.spanContext(), attributes: { why: "x" } });
          root.end();
          const other = tracer.startSpan("elsewhere", {
            attributes: {
              "agentlightning.rollout_id": b.rollout_id,
              "agentlightning.attempt_id": b.attempt_id,
            },
          });
          other.end();
        },
      );
      const exporter = new OTLPTraceExporter({
        url: `${h.server.url}/v1/traces`,
        headers: { authorization: "Bearer tok" },
        compression: compression as any,
      });
      expect(await exportWith(exporter, spans)).toBe(0);
      await exporter.shutdown();

      const inA = (await h.store.querySpans(a.rollout_id)).items;
      expect(inA.map((s) => s.name).sort()).toEqual(["llm", "root"]);
      const llm = inA.find((s) => s.name === "llm")!;
      const root = inA.find((s) => s.name === "root")!;
      const sdkRoot = spans.find((s) => s.name === "root")!;
      expect(llm.sequence_id).toBe(42);
      // Missing ids are allocated (in bulk) before the batch is stored; the explicit 42 then bumps the counter.
      expect(root.sequence_id).toBe(1);
      expect(await h.store.getNextSpanSequenceId(a.rollout_id, a.attempt_id)).toBe(43);
      expect(root.trace_id).toBe(sdkRoot.spanContext().traceId);
      expect(root.span_id).toBe(sdkRoot.spanContext().spanId);
      expect(root.parent_id).toBeNull();
      expect(llm.parent_id).toBe(root.span_id);
      expect(llm.trace_id).toBe(root.trace_id);
      expect(root.attributes).toMatchObject({ task: "sum", n: 3, ok: true, tags: ["a", "b"] });
      expect(llm.status).toEqual({ status_code: "ERROR", description: "bad" });
      expect(llm.events).toEqual([
        { name: "token", attributes: { index: 1 }, timestamp: expect.any(Number) },
      ]);
      expect(root.links[0]).toMatchObject({
        context: { span_id: llm.span_id, trace_id: llm.trace_id },
        attributes: { why: "x" },
      });
      const expectedStart = sdkRoot.startTime[0] + sdkRoot.startTime[1] / 1e9;
      expect(root.start_time).toBeCloseTo(expectedStart, 5);
      expect(root.end_time!).toBeGreaterThanOrEqual(root.start_time!);
      expect(root.resource.attributes).toMatchObject({
        "service.name": "agent",
        "agentlightning.rollout_id": a.rollout_id,
      });
      expect(root.context).toMatchObject({ trace_id: root.trace_id, span_id: root.span_id });
      // A span stored for a preparing attempt brings it (and the rollout) to running.
      expect((await h.store.getRolloutById(a.rollout_id))!.status).toBe("running");

      const inB = (await h.store.querySpans(b.rollout_id)).items;
      expect(inB.map((s) => [s.name, s.attempt_id, s.sequence_id])).toEqual([["elsewhere", b.attempt_id, 1]]);
    });
  }

  it("drops spans without ids, stores the rest, and reports the count as a partial success", async () => {
    const a = (await h.store.startRollout({ input: 1 })).attempt;
    const spans = recordSpans({}, (tracer) => {
      tracer.startSpan("anonymous").end();
      tracer
        .startSpan("named", {
          attributes: {
            "agentlightning.rollout_id": a.rollout_id,
            "agentlightning.attempt_id": a.attempt_id,
          },
        })
        .end();
      tracer
        .startSpan("unknown rollout", {
          attributes: {
            "agentlightning.rollout_id": "ro-000000000000",
            "agentlightning.attempt_id": "at-00000000",
          },
        })
        .end();
    });
    const exporter = new OTLPTraceExporter({
      url: `${h.server.url}/v1/traces`,
      headers: { authorization: "Bearer tok" },
    });
    expect(await exportWith(exporter, spans)).toBe(0);
    await exporter.shutdown();
    expect((await h.store.querySpans(a.rollout_id)).items.map((s) => s.name)).toEqual(["named"]);
    const refused = logs.filter((l) => l.msg === "otlp spans refused");
    expect(refused.map((l) => l.level)).toEqual(["warn", "warn"]);
    expect(refused).toContainEqual(
      expect.objectContaining({ reason: expect.stringMatching(/no agentlightning\.rollout_id/), spans: 1 }),
    );
    expect(refused).toContainEqual(
      expect.objectContaining({
        reason: expect.stringMatching(/^unknown rollout or attempt/),
        rollout_id: "ro-000000000000",
        attempt_id: "at-00000000",
        spans: 1,
      }),
    );
  });
});

describe("POST /v1/traces wire details", () => {
  const auth = { authorization: "Bearer tok" };

  it("accepts OTLP/JSON (camelCase, hex ids, int64 as strings, nested values)", async () => {
    const a = (await h.store.startRollout({ input: 1 })).attempt;
    const body = {
      resourceSpans: [
        {
          resource: {
            attributes: [
              { key: "agentlightning.rollout_id", value: { stringValue: a.rollout_id } },
              { key: "agentlightning.attempt_id", value: { stringValue: a.attempt_id } },
            ],
          },
          scopeSpans: [
            {
              scope: { name: "json" },
              spans: [
                {
                  traceId: "5B8EFFF798038103D269B633813FC60C",
                  spanId: "EEE19B7EC3C1B174",
                  parentSpanId: "EEE19B7EC3C1B173",
                  name: "json-span",
                  kind: 1,
                  startTimeUnixNano: "1700000000000000000",
                  endTimeUnixNano: "1700000001500000000",
                  attributes: [
                    { key: "agentlightning.span_sequence_id", value: { intValue: "7" } },
                    { key: "f", value: { doubleValue: 0.5 } },
                    { key: "list", value: { arrayValue: { values: [{ intValue: 1 }, { intValue: "2" }] } } },
                    {
                      key: "obj",
                      value: { kvlistValue: { values: [{ key: "k", value: { boolValue: true } }] } },
                    },
                    { key: "raw", value: { bytesValue: Buffer.from([1, 255]).toString("base64") } },
                  ],
                  status: { code: 1 },
                },
              ],
            },
          ],
        },
      ],
    };
    const res = await h.call("POST", "/v1/traces", body, { ...auth, "content-type": "application/json" });
    expect(res).toMatchObject({ status: 200, body: {} });
    const [span] = (await h.store.querySpans(a.rollout_id)).items;
    expect(span).toMatchObject({
      name: "json-span",
      sequence_id: 7,
      trace_id: "5b8efff798038103d269b633813fc60c",
      span_id: "eee19b7ec3c1b174",
      parent_id: "eee19b7ec3c1b173",
      start_time: 1700000000,
      end_time: 1700000001.5,
      status: { status_code: "OK", description: null },
      attributes: { f: 0.5, list: [1, 2], obj: { k: true }, raw: "01ff" },
    });
  });

  it("rejects other content types and bad payloads with 400 (a protobuf google.rpc.Status)", async () => {
    const wrongType = await fetch(`${h.server.url}/v1/traces`, {
      method: "POST",
      headers: { ...auth, "content-type": "text/plain" },
      body: "x",
    });
    expect(wrongType.status).toBe(400);
    const status = RpcStatus.toObject(RpcStatus.decode(new Uint8Array(await wrongType.arrayBuffer()))) as any;
    expect(status.message).toContain("Content-Type");
    const garbage = await fetch(`${h.server.url}/v1/traces`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/x-protobuf" },
      body: new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01]),
    });
    expect(garbage.status).toBe(400);
    const badGzip = await fetch(`${h.server.url}/v1/traces`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/x-protobuf", "content-encoding": "gzip" },
      body: new Uint8Array([1, 2, 3]),
    });
    expect(badGzip.status).toBe(400);
    const badJson = await h.call("POST", "/v1/traces", "{", { ...auth, "content-type": "application/json" });
    expect(badJson.status).toBe(400);
  });

  it("an empty body is fine; responses are gzipped when the client accepts gzip", async () => {
    const empty = await fetch(`${h.server.url}/v1/traces`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/x-protobuf" },
    });
    expect(empty.status).toBe(200);
    expect(new Uint8Array(await empty.arrayBuffer())).toHaveLength(0);

    const body = Buffer.from(
      JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ name: "no-ids" }] }] }] }),
    );
    const res = await fetch(`${h.server.url}/v1/traces`, {
      method: "POST",
      headers: {
        ...auth,
        "content-type": "application/json",
        "content-encoding": "gzip",
        "accept-encoding": "gzip",
      },
      body: gzipSync(body),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-encoding")).toBe("gzip");
    // fetch transparently inflates; the partial success names the dropped span.
    expect(await res.json()).toMatchObject({ partialSuccess: { rejectedSpans: "1" } });

    const proto = await fetch(`${h.server.url}/v1/traces`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/x-protobuf", "accept-encoding": "gzip" },
      body: new Uint8Array(0),
    });
    expect(proto.status).toBe(200);
    const decoded = ExportTraceServiceResponse.decode(new Uint8Array(await proto.arrayBuffer()));
    expect(ExportTraceServiceResponse.toObject(decoded)).toEqual({});
  });
});
