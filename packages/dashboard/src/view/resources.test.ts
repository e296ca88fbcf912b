import type { ResourcesUpdate } from "@agl/core";
import { describe, expect, it } from "vitest";
import { diffResources, HIDDEN, isSecretKey, redactSecrets, resourceEntries } from "./resources.js";

const version = (id: string, resources: Record<string, unknown>, v: number): ResourcesUpdate =>
  ({ resources_id: id, resources, create_time: v, update_time: v, version: v }) as ResourcesUpdate;

describe("redactSecrets", () => {
  it("hides API keys, tokens and passwords at any depth, and credentials inside URLs", () => {
    const out = redactSecrets({
      api_key: "sk-live-123",
      nested: { token: "t0k", Authorization: "Bearer x", password: "p", keep: "visible" },
      list: [{ secret: "s" }],
      endpoint: "https://user:hunter2@host/v1?api_key=abc&x=1",
      empty_key: null,
    });
    const text = JSON.stringify(out);
    for (const secret of ["sk-live-123", "t0k", "Bearer x", "hunter2", "abc"])
      expect(text).not.toContain(secret);
    expect(out.api_key).toBe(HIDDEN);
    expect(out.nested.keep).toBe("visible");
    expect(out.endpoint).toBe(`https://user:${HIDDEN}@host/v1?api_key=${HIDDEN}&x=1`);
    expect(out.empty_key).toBeNull();
  });

  it("knows which keys are secrets", () => {
    expect(["api_key", "apiKey", "OPENAI_API_KEY", "access_token", "client_secret"].every(isSecretKey)).toBe(
      true,
    );
    expect(["model", "endpoint", "tokenizer", "max_tokens", "keyword"].some(isSecretKey)).toBe(false);
  });
});

describe("resource versions", () => {
  const llm = (model: string, key: string) => ({
    resource_type: "llm",
    endpoint: "http://h/v1",
    model,
    api_key: key,
    sampling_parameters: {},
  });
  const tmpl = (template: string) => ({ resource_type: "prompt_template", template, engine: "f-string" });

  it("summarises LLMs and templates without keys", () => {
    const entries = resourceEntries({ main: llm("qwen", "sk-1"), prompt: tmpl("Hi {name}\nmore") } as never);
    expect(entries.map((e) => [e.name, e.summary])).toEqual([
      ["main", "qwen @ http://h/v1"],
      ["prompt", "f-string: Hi {name}"],
    ]);
    expect(entries[0]!.text).not.toContain("sk-1");
  });

  it("diffs templates line by line and reports added / removed / unchanged resources", () => {
    const a = version("rs-1", { main: llm("m1", "sk-1"), prompt: tmpl("line 1\nline 2"), old: tmpl("x") }, 1);
    const b = version(
      "rs-2",
      { main: llm("m1", "sk-2"), prompt: tmpl("line 1\nline two\nline 3"), neu: tmpl("y") },
      2,
    );
    const diffs = diffResources(a, b);
    expect(diffs.map((d) => [d.name, d.change])).toEqual([
      ["main", "unchanged"],
      ["neu", "added"],
      ["old", "removed"],
      ["prompt", "changed"],
    ]);
    const prompt = diffs.find((d) => d.name === "prompt")!;
    expect(prompt.lines).toEqual([
      { kind: "same", text: "line 1" },
      { kind: "removed", text: "line 2" },
      { kind: "added", text: "line two" },
      { kind: "added", text: "line 3" },
    ]);
    // a key rotation is not shown as a change, and never printed
    expect(JSON.stringify(diffs)).not.toMatch(/sk-[12]/);
  });
});
