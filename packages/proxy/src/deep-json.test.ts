/**
 * Over-deep JSON is refused before it is parsed, on the LLM routes and the control routes: JSON.parse
 * builds every array of `[[[[…` before anything can look at the value, over a gigabyte of memory for a
 * body under the 16 MiB limit, only for the body to be refused afterwards.
 */
import { MAX_BODY_NESTING_DEPTH } from "@agl/core";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

const ADMIN = "admin-token-for-tests";
const HALF = 7 * 1024 * 1024;
/** 14 MiB of nested arrays: under the proxy's 16 MiB default body limit. */
const deepArrays = () => "[".repeat(HALF) + "]".repeat(HALF);
const MiB = 2 ** 20;

/** Lengths of every string JSON.parse is given while `run` runs (the proxy is in this process). */
async function parsedLengths(run: () => Promise<void>): Promise<number[]> {
  const lengths: number[] = [];
  const parse = JSON.parse;
  const spy = vi.spyOn(JSON, "parse").mockImplementation((text, reviver) => {
    lengths.push(String(text).length);
    return parse(text, reviver);
  });
  try {
    await run();
  } finally {
    spy.mockRestore();
  }
  return lengths;
}

function nested(depth: number): unknown {
  let value: unknown = { type: "string" };
  for (let i = 0; i < depth; i++) value = { type: "object", properties: { k: value } };
  return value;
}

describe("deep JSON bodies on the proxy", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ tap: false, proxy: { adminToken: ADMIN } });
  });
  afterAll(() => h.close());
  afterEach(() => vi.restoreAllMocks());

  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${h.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json", ...headers },
      body,
    });

  it("a 14 MiB body of nested arrays is a 400 naming the limit, never parsed: peak memory stays bounded", async () => {
    const body = deepArrays();
    const peakBefore = process.resourceUsage().maxRSS * 1024;
    const answers: Array<{ path: string; status: number; json: any }> = [];
    const lengths = await parsedLengths(async () => {
      for (const path of ["/v1/chat/completions", "/v1/responses", "/v1/messages"]) {
        const res = await post(path, body);
        answers.push({ path, status: res.status, json: await res.json() });
      }
    });
    const limit = `deeper than ${MAX_BODY_NESTING_DEPTH} levels`;
    for (const a of answers) {
      expect(a.status, a.path).toBe(400);
      const error = a.json.error;
      expect(error.type, a.path).toBe("invalid_request_error");
      expect(error.message, a.path).toContain(limit);
    }
    // each route answers in its own API's error shape (Anthropic's on /v1/messages)
    expect(answers[2]!.json.type).toBe("error");
    expect(lengths.filter((n) => n >= body.length)).toEqual([]);
    // Parsing one such body takes over a gigabyte; the text and its buffers are tens of MB.
    const peakGrowth = process.resourceUsage().maxRSS * 1024 - peakBefore;
    expect(peakGrowth / MiB).toBeLessThan(400);
  });

  it("four at once: all 400 without parsing, health keeps answering", async () => {
    const body = deepArrays();
    const lengths = await parsedLengths(async () => {
      const [statuses, health] = await Promise.all([
        Promise.all(
          Array.from({ length: 4 }, () => post("/v1/chat/completions", body).then((r) => r.status)),
        ),
        fetch(`${h.url}/healthz`).then((r) => r.status),
      ]);
      expect(statuses).toEqual([400, 400, 400, 400]);
      expect(health).toBe(200);
    });
    expect(lengths.filter((n) => n >= body.length)).toEqual([]);
  });

  it("control routes: a deep body is a 422 naming the limit before parsing", async () => {
    const body = deepArrays();
    let res: Response | undefined;
    const lengths = await parsedLengths(async () => {
      res = await post("/proxy/resume", body);
    });
    expect(res!.status).toBe(422);
    expect((await res!.json()).detail).toContain(`deeper than ${MAX_BODY_NESTING_DEPTH} levels`);
    expect(lengths.filter((n) => n >= body.length)).toEqual([]);
  });

  it("a large call whose tool schema nests as deep as real ones still goes through", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const res = await post(
      `/rollout/${rolloutId}/attempt/${attemptId}/v1/chat/completions`,
      JSON.stringify({
        model: "m",
        // over the size where the depth is scanned, so the scan itself is what lets it through
        messages: [{ role: "user", content: "x".repeat(200 * 1024) }],
        tools: [{ type: "function", function: { name: "f", parameters: nested(20) } }],
      }),
    );
    expect(res.status).toBe(200);
  });
});
