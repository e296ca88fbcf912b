import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Harness, harness } from "./helpers.js";

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.close();
});

const MiB = 1024 * 1024;
const json = { "content-type": "application/json" };

/** A gzip body of ~300 KB that inflates to `mib` MiB (concatenated gzip members, cheap to build). */
function gzipBomb(mib: number): Buffer {
  const member = gzipSync(Buffer.alloc(MiB), { level: 9 });
  return Buffer.concat(Array.from({ length: mib }, () => member));
}

function otlpJson(rolloutId: string, attemptId: string, attributes: unknown[]) {
  return {
    resourceSpans: [
      {
        resource: {
          attributes: [
            { key: "agentlightning.rollout_id", value: { stringValue: rolloutId } },
            { key: "agentlightning.attempt_id", value: { stringValue: attemptId } },
          ],
        },
        scopeSpans: [
          {
            spans: [
              {
                traceId: "0123456789abcdef0123456789abcdef",
                spanId: "0123456789abcdef",
                name: "s",
                attributes,
              },
            ],
          },
        ],
      },
    ],
  };
}

function nestedKvlist(depth: number): unknown {
  let value: unknown = { stringValue: "leaf" };
  for (let i = 0; i < depth; i++) value = { kvlistValue: { values: [{ key: "k", value }] } };
  return value;
}

describe("OTLP ingest limits", () => {
  it("stops inflating a gzip bomb at the body limit: 413, memory bounded, server fine", async () => {
    const bomb = gzipBomb(300);
    expect(bomb.length).toBeLessThan(400 * 1024);
    const before = process.memoryUsage().arrayBuffers;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().arrayBuffers);
    }, 1);
    const answers = await Promise.all(
      Array.from({ length: 4 }, () =>
        fetch(`${h.server.url}/v1/traces`, {
          method: "POST",
          headers: { "content-type": "application/x-protobuf", "content-encoding": "gzip" },
          body: new Uint8Array(bomb),
        }),
      ),
    );
    clearInterval(sampler);
    expect(answers.map((a) => a.status)).toEqual([413, 413, 413, 413]);
    // Default body limit 32 MiB, two inflations at once (plus garbage not yet collected): less than one
    // request used to take alone (8x the body limit, 256 MiB).
    expect((peak - before) / MiB).toBeLessThan(256);
    expect((await h.call("GET", "/v1/agl/health")).status).toBe(200);
  });

  it("refuses a span with too deeply nested attributes alone (partial success, not 500), and stores NUL text sanitised", async () => {
    const r = await h.store.startRollout({ input: 1 });
    const deep = otlpJson(r.rollout_id, r.attempt.attempt_id, [{ key: "deep", value: nestedKvlist(200) }]);
    const res = await h.call("POST", "/v1/traces", deep, json);
    expect(res.status).toBe(200);
    expect(res.body.partialSuccess.rejectedSpans).toBe("1");
    expect(res.body.partialSuccess.errorMessage).toMatch(/attributes.*nest deeper/);
    const nul = otlpJson(r.rollout_id, r.attempt.attempt_id, [
      { key: "k", value: { stringValue: "a\u0000" } },
    ]);
    const sanitised = await h.call("POST", "/v1/traces", nul, json);
    expect(sanitised.status).toBe(200);
    expect(sanitised.body.partialSuccess.rejectedSpans).toBeUndefined();
    expect(sanitised.body.partialSuccess.errorMessage).toMatch(/1 span\(s\) stored with .*U\+FFFD/);
    expect((await h.store.querySpans(r.rollout_id)).items.map((s) => s.attributes.k)).toEqual(["a\uFFFD"]);
    const ok = otlpJson(r.rollout_id, r.attempt.attempt_id, [{ key: "fine", value: nestedKvlist(10) }]);
    expect((await h.call("POST", "/v1/traces", ok, json)).status).toBe(200);
    // Same span id as the sanitised span: a resend, ignored.
    expect((await h.store.querySpans(r.rollout_id)).items).toHaveLength(1);
  });
});
