import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { servedModelVersion } from "./forward.js";
import { startHarness } from "./test-support/harness.js";

/**
 * The version recorded on a call's span is the one that served it: the backend's `x-agl-model-version`
 * header when it sends one (a policy server that publishes weights between calls), else the
 * proxy-level version set at `resume`.
 */

/** A backend that answers every chat call with the version the test sets (as a header), or none. */
async function versionedBackend(): Promise<{
  url: string;
  version: { value: string | null };
  close(): Promise<void>;
}> {
  const version = { value: null as string | null };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const headers: Record<string, string> = {};
      if (version.value !== null) headers["x-agl-model-version"] = version.value;
      const stream = req.headers.accept?.includes("text/event-stream");
      if (stream) {
        res.writeHead(200, { ...headers, "content-type": "text/event-stream" });
        const chunk = (delta: object, finish: string | null) =>
          `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
        res.end(`${chunk({ role: "assistant", content: "hi" }, null)}${chunk({}, "stop")}data: [DONE]\n\n`);
        return;
      }
      res.writeHead(200, { ...headers, "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: "c1",
          object: "chat.completion",
          created: 0,
          model: "m",
          choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
          prompt_token_ids: [1, 2],
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    version,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe("model version of a call", () => {
  it("records the backend's x-agl-model-version (streamed or not), else the proxy-level version", async () => {
    const backend = await versionedBackend();
    const h = await startHarness({ proxy: { backends: [{ url: backend.url }] }, tap: false });
    try {
      const a = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      const messages = [{ role: "user" as const, content: "x" }];
      await h.proxy.resume({ modelVersion: 3 });
      await client.chat.completions.create({ model: "policy", messages });
      backend.version.value = "5";
      await client.chat.completions.create({ model: "policy", messages });
      backend.version.value = "6";
      const stream = await client.chat.completions.create({ model: "policy", messages, stream: true });
      for await (const _ of stream);
      backend.version.value = "lora-v7";
      await client.chat.completions.create({ model: "policy", messages });
      const spans = (await h.spans(a.rolloutId)).sort((x, y) => x.sequence_id - y.sequence_id);
      expect(spans.map((s) => s.attributes["agl.proxy.model_version"])).toEqual([3, 5, 6, "lora-v7"]);
    } finally {
      await h.close();
      await backend.close();
    }
  });

  it("parses integer headers as numbers and ignores what no store could keep", () => {
    expect(servedModelVersion(undefined)).toBeNull();
    expect(servedModelVersion(" 12 ")).toBe(12);
    expect(servedModelVersion("-1")).toBe(-1);
    expect(servedModelVersion("policy-v2")).toBe("policy-v2");
    expect(servedModelVersion("")).toBeNull();
    expect(servedModelVersion("x".repeat(201))).toBeNull();
    expect(servedModelVersion("a\u0000b")).toBeNull();
  });
});
