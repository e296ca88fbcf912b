import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PolicyModel } from "../model/policy-model.js";
import { proxiedRollout } from "../test-support/proxied-rollout.js";
import { type VersionedServer, versionedServer } from "../test-support/versioned-server.js";
import type { PolicyServer } from "./policy-server.js";
import type { VersionedEngine } from "./version-publication.js";

/**
 * Streamed responses carry the version that generates them: the headers (with `x-agl-model-version`) go
 * out at the first token, when the version is fixed, and every chunk's fingerprint names the same
 * version even when a new one is published while the stream runs. Behind the LLM proxy, the span of a
 * streamed call records that version, not the proxy-level one.
 */
let s: VersionedServer["s"];
let other: PolicyModel;
let original: PolicyModel;
let engine: VersionedEngine;
let server: PolicyServer<VersionedEngine>;

interface Streamed {
  header: string | null;
  fingerprints: string[];
  text: string;
}

/** POST a streamed request; `onChunk` runs after each chunk is read (the stream is still open then). */
async function stream(path: string, body: object, onChunk?: (n: number) => void): Promise<Streamed> {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "policy", stream: true, ...body }),
  });
  expect(res.status).toBe(200);
  const out: Streamed = { header: res.headers.get("x-agl-model-version"), fingerprints: [], text: "" };
  const decoder = new TextDecoder();
  let buf = "";
  let n = 0;
  for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(part, { stream: true });
    let at = buf.indexOf("\n\n");
    while (at >= 0) {
      const event = buf.slice(0, at).replace(/^data: /, "");
      buf = buf.slice(at + 2);
      at = buf.indexOf("\n\n");
      if (event === "[DONE]") continue;
      const chunk = JSON.parse(event) as {
        system_fingerprint: string;
        choices: Array<{ delta?: { content?: string }; text?: string }>;
      };
      out.fingerprints.push(chunk.system_fingerprint);
      out.text += chunk.choices.map((c) => c.delta?.content ?? c.text ?? "").join("");
      onChunk?.(++n);
    }
  }
  return out;
}

const chat = { messages: [{ role: "user", content: "hi" }], max_tokens: 24, ignore_eos: true, seed: 3 };
const completion = { prompt: "hi", max_tokens: 24, ignore_eos: true, seed: 3 };

let setup: VersionedServer;
beforeAll(async () => {
  setup = await versionedServer();
  ({ s, other, original, engine, server } = setup);
});

afterAll(() => setup?.stop());

describe("streamed responses and the serving version", () => {
  it("send x-agl-model-version and keep the version across a publication mid-stream", async () => {
    for (const [path, body] of [
      ["/chat/completions", chat],
      ["/completions", completion],
    ] as const) {
      const v = engine.version;
      const reference = await stream(path, body);
      expect(reference.header).toBe(String(v));
      // Mid-stream the weights change and a new version is published: this stream stays on its own.
      let published = false;
      const during = await stream(path, body, (n) => {
        if (n !== 2) return;
        s.model.setWeightsFrom(other);
        engine.publish();
        published = true;
      });
      expect(published).toBe(true);
      expect(during.header).toBe(String(v));
      expect(new Set(during.fingerprints)).toEqual(new Set([`agl-policy-v${v}`]));
      expect(during.text).toBe(reference.text);
      const after = await stream(path, body);
      expect(after.header).toBe(String(v + 1));
      expect(new Set(after.fingerprints)).toEqual(new Set([`agl-policy-v${v + 1}`]));
      expect(after.text).not.toBe(reference.text);
      // Back to the first weights for the next route (as version v + 2).
      s.model.setWeightsFrom(original);
      engine.publish();
    }
  });

  it("the LLM proxy records the streamed call's serving version on its span", async () => {
    const { client, spans: spansOf, stop } = await proxiedRollout(server.baseUrl);
    try {
      const served = engine.version;
      const res = await client.chat.completions.create({
        model: "policy",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 4,
        stream: true,
      });
      for await (const _ of res);
      const spans = await spansOf();
      expect(spans.map((x) => x.attributes["agl.proxy.model_version"])).toEqual([served]);
    } finally {
      await stop();
    }
  });
});
