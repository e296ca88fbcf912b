/**
 * `/v1/responses` conversations across two `agl-proxy` processes on one store server, with each replica
 * restarted mid-conversation (SIGTERM, then SIGKILL after a drain): every turn continues from state another
 * process created (`previous_response_id`, `item_reference`), and the engine sees the whole conversation.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LightningStoreClient } from "@agl/client";
import { type MockRequestInfo, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { type Child, spawnStoreServer, spawnTs } from "../store-http/processes.js";
import { freePort } from "../support/free-port.js";
import { FULL, report } from "./config.js";

const CONVERSATIONS = FULL ? 100 : 8;

/** Asked to add, it calls `add`; given the tool's result, it states it; else it says how much it was sent. */
function engine(request: MockRequestInfo) {
  const messages: any[] = request.body?.messages ?? [];
  const last = messages.at(-1);
  if (last?.role === "tool") return { content: `The sum is ${last.content}.` };
  const m = /add (\d+) (\d+)/.exec(String(last?.content ?? ""));
  if (m && request.body?.tools)
    return {
      content: null,
      tool_calls: [{ name: "add", arguments: JSON.stringify({ a: +m[1]!, b: +m[2]! }) }],
    };
  return { content: `heard ${messages.length}: ${last?.content}` };
}

/** An agl-proxy process on a fixed port, so it can be restarted where its clients expect it. */
class ProxyProcess {
  child: Child | null = null;
  constructor(
    readonly port: number,
    readonly args: string[],
  ) {}
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  async start(): Promise<void> {
    const child = spawnTs("packages/proxy/src/cli.ts", [...this.args, "--port", String(this.port)], {
      AGL_LOG_LEVEL: "info",
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`agl-proxy did not start: ${child.stderr()}`)), 60_000);
      const check = () => {
        if (/agl-proxy listening on/.test(child.stdout() + child.stderr())) {
          clearTimeout(timer);
          child.proc.stdout!.off("data", check);
          child.proc.stderr!.off("data", check);
          resolve();
        }
      };
      child.proc.stdout!.on("data", check);
      child.proc.stderr!.on("data", check);
      child.exited.then((code) => reject(new Error(`agl-proxy exited (${code}): ${child.stderr()}`)));
    });
  }
  async stop(signal: "SIGTERM" | "SIGKILL"): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child) return;
    if (signal === "SIGKILL") {
      // everything it answered is in the store first: /proxy/drain waits for the span writes
      const drained = await (await fetch(`${this.url}/proxy/drain?timeout=30`, { method: "POST" })).json();
      expect(drained.drained).toBe(true);
    }
    child.proc.kill(signal);
    await child.exited;
  }
}

const tools = [
  {
    type: "function" as const,
    name: "add",
    description: "Add two numbers",
    parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
    strict: false,
  },
];

describe("Responses API state across proxy restarts and replicas", () => {
  it("every conversation continues on another replica and on restarted ones", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-responses-"));
    const mock = await startMockLLMServer({ respond: engine });
    const storeServer = await spawnStoreServer(["--db", join(dir, "store.db"), "--no-dashboard"]);
    const store = new LightningStoreClient({ url: storeServer.url });
    const args = ["--store", storeServer.url, "--backend", `${mock.url}/v1`, "--model", "policy"];
    const a = new ProxyProcess(await freePort(), [...args, "--health-interval-ms", "0"]);
    const b = new ProxyProcess(await freePort(), [...args, "--health-interval-ms", "0"]);
    try {
      await Promise.all([a.start(), b.start()]);
      const convs = await Promise.all(
        Array.from({ length: CONVERSATIONS }, async (_, i) => {
          const r = await store.startRollout({ input: { conversation: i } });
          const path = `/rollout/${r.rollout_id}/attempt/${r.attempt.attempt_id}/v1`;
          const client = (p: ProxyProcess) =>
            new OpenAI({ baseURL: `${p.url}${path}`, apiKey: "x", maxRetries: 0, timeout: 60_000 });
          return { i, client, rolloutId: r.rollout_id, hello: `hello ${i}` };
        }),
      );
      const sent = (content: string) => {
        const hits = mock.requests.filter((q) =>
          (q.body?.messages ?? []).some((m: any) => m.role === "user" && m.content === content),
        );
        return hits.at(-1)?.body.messages as any[];
      };

      // turn 1 on A, turn 2 (previous_response_id) on B, streamed
      const first = await Promise.all(
        convs.map((c) =>
          c.client(a).responses.create({ model: "m", instructions: "be brief", input: c.hello }),
        ),
      );
      for (const [i, r] of first.entries()) expect(r.output_text).toBe(`heard 2: hello ${i}`);
      const second = await Promise.all(
        convs.map((c, i) =>
          c
            .client(b)
            .responses.stream({ model: "m", previous_response_id: first[i]!.id, input: "add 2 3", tools })
            .finalResponse(),
        ),
      );
      const calls = second.map((r) => r.output.find((o) => o.type === "function_call")!);
      for (const call of calls) expect(call).toMatchObject({ name: "add", arguments: '{"a":2,"b":3}' });

      // A restarts (SIGTERM): turn 3 continues B's response on the new A
      await a.stop("SIGTERM");
      await a.start();
      const third = await Promise.all(
        convs.map((c, i) =>
          c.client(a).responses.create({
            model: "m",
            previous_response_id: second[i]!.id,
            input: [{ type: "function_call_output", call_id: calls[i]!.call_id, output: "5" }],
            tools,
          }),
        ),
      );
      for (const r of third) expect(r.output_text).toBe("The sum is 5.");
      for (const [i, call] of calls.entries()) {
        const turn3 = mock.requests.findLast((q) =>
          (q.body?.messages ?? []).some((m: any) => m.role === "tool" && m.tool_call_id === call.call_id),
        )!.body.messages;
        expect(turn3).toEqual([
          { role: "user", content: `hello ${i}` },
          { role: "assistant", content: `heard 2: hello ${i}` },
          { role: "user", content: "add 2 3" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: call.call_id, type: "function", function: { name: "add", arguments: '{"a":2,"b":3}' } },
            ],
          },
          { role: "tool", tool_call_id: call.call_id, content: "5" },
        ]);
      }

      // B dies (SIGKILL after a drain) and restarts: turn 4 names every earlier output by item_reference
      await b.stop("SIGKILL");
      await b.start();
      const fourth = await Promise.all(
        convs.map((c, i) =>
          c.client(b).responses.create({
            model: "m",
            input: [
              { role: "user", content: c.hello },
              { type: "item_reference", id: first[i]!.output[0]!.id! },
              { role: "user", content: "add 2 3" },
              { type: "item_reference", id: calls[i]!.id! },
              { type: "function_call_output", call_id: calls[i]!.call_id, output: "5" },
              { type: "item_reference", id: third[i]!.output[0]!.id! },
              { role: "user", content: `bye ${i}` },
            ],
          }),
        ),
      );
      for (const [i, r] of fourth.entries()) expect(r.output_text).toBe(`heard 7: bye ${i}`);
      for (const [i, c] of convs.entries()) expect(sent(`bye ${i}`)).toEqual(turnFour(c.hello, calls[i]!, i));

      await report("responses-restart", {
        conversations: CONVERSATIONS,
        turns: CONVERSATIONS * 4,
        replicas: 2,
        restarts: 2,
        errors: 0,
      });
    } finally {
      await a.stop("SIGTERM").catch(() => {});
      await b.stop("SIGTERM").catch(() => {});
      storeServer.proc.kill("SIGKILL");
      await storeServer.exited;
      await mock.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});

/** The chat messages turn 4 must reach the engine as: every referenced item resolved. */
function turnFour(hello: string, call: { call_id: string }, i: number) {
  return [
    { role: "user", content: hello },
    { role: "assistant", content: `heard 2: ${hello}` },
    { role: "user", content: "add 2 3" },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: call.call_id, type: "function", function: { name: "add", arguments: '{"a":2,"b":3}' } },
      ],
    },
    { role: "tool", tool_call_id: call.call_id, content: "5" },
    { role: "assistant", content: "The sum is 5." },
    { role: "user", content: `bye ${i}` },
  ];
}
