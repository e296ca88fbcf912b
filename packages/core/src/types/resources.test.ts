import { describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../errors.js";
import {
  formatPromptTemplate,
  llm,
  promptTemplate,
  proxyLLM,
  proxyLLMBaseUrl,
  resolveForAttempt,
} from "./resources.js";

/** The InvalidArgumentError `fn` throws (the test fails when it throws anything else or nothing). */
function invalid(fn: () => unknown): InvalidArgumentError {
  try {
    fn();
  } catch (error) {
    if (InvalidArgumentError.isInstance(error)) return error;
    throw error;
  }
  throw new Error("expected an InvalidArgumentError, but the call succeeded");
}

describe("formatPromptTemplate", () => {
  it("substitutes {name} placeholders, strings as is and other values as JSON", () => {
    const t = promptTemplate("Q: {question} ({ n }) {meta}");
    expect(formatPromptTemplate(t, { question: "2+2?", n: 3, meta: { a: 1 } })).toBe('Q: 2+2? (3) {"a":1}');
    expect(formatPromptTemplate("{a}{a}", { a: "x", unused: 1 })).toBe("xx");
  });

  it("turns {{ and }} into literal braces and never substitutes inside them", () => {
    expect(formatPromptTemplate("{{x}} = {x}", { x: 1 })).toBe("{x} = 1");
    expect(formatPromptTemplate('json: {{"k": {v}}}', { v: 2 })).toBe('json: {"k": 2}');
    expect(formatPromptTemplate("{{{{", {})).toBe("{{");
  });

  it("names a missing placeholder and lists what was given", () => {
    const error = invalid(() => formatPromptTemplate("Hi {name}, {greeting}", { name: "Ann" }));
    expect(error.field).toBe("greeting");
    expect(error.message).toContain("{greeting}");
    expect(error.message).toContain("given: name");
    expect(invalid(() => formatPromptTemplate("{x}", {})).message).toContain("given: none");
  });

  it("refuses to format a jinja or poml template, naming the engine", () => {
    for (const engine of ["jinja", "poml"] as const) {
      const error = invalid(() => formatPromptTemplate(promptTemplate("{{ x }}", engine), { x: 1 }));
      expect(error.field).toBe("engine");
      expect(error.message).toContain(engine);
    }
  });
});

describe("proxyLLMBaseUrl (Agent Lightning §1.3)", () => {
  const at = (endpoint: string) => proxyLLMBaseUrl({ endpoint }, "ro-1", "at-1");

  it("inserts /rollout/{rid}/attempt/{aid} before a trailing /v1, and re-appends /v1 only if it was there", () => {
    expect(at("http://h:9/v1")).toBe("http://h:9/rollout/ro-1/attempt/at-1/v1");
    expect(at("http://h:9")).toBe("http://h:9/rollout/ro-1/attempt/at-1");
    expect(at("http://h:9/api/v1")).toBe("http://h:9/api/rollout/ro-1/attempt/at-1/v1");
    expect(at("http://h:9/v10")).toBe("http://h:9/v10/rollout/ro-1/attempt/at-1");
  });

  it("strips one trailing slash first", () => {
    expect(at("http://h:9/")).toBe("http://h:9/rollout/ro-1/attempt/at-1");
    expect(at("http://h:9/v1/")).toBe("http://h:9/rollout/ro-1/attempt/at-1/v1");
  });

  it("returns the endpoint unchanged when both ids are null or absent", () => {
    for (const endpoint of ["http://h:9/v1/", "http://h:9"]) {
      expect(proxyLLMBaseUrl({ endpoint }, null, null)).toBe(endpoint);
      expect(proxyLLMBaseUrl({ endpoint }, undefined, undefined)).toBe(endpoint);
    }
  });

  it("rejects exactly one id, naming the missing one", () => {
    expect(invalid(() => proxyLLMBaseUrl({ endpoint: "http://h/v1" }, "ro-1", null)).field).toBe(
      "attempt_id",
    );
    expect(invalid(() => proxyLLMBaseUrl({ endpoint: "http://h/v1" }, undefined, "at-1")).field).toBe(
      "rollout_id",
    );
  });
});

describe("resolveForAttempt", () => {
  const proxy = proxyLLM({
    endpoint: "http://h:9/v1",
    model: "m",
    api_key: "shared",
    sampling_parameters: { temperature: 1 },
  });

  it("turns a ProxyLLM into a plain LLM at the attempt's URL, with a copy of its sampling parameters", () => {
    const resolved = resolveForAttempt(proxy, "ro-1", "at-1");
    expect(resolved).toEqual({
      resource_type: "llm",
      endpoint: "http://h:9/rollout/ro-1/attempt/at-1/v1",
      model: "m",
      api_key: "shared",
      sampling_parameters: { temperature: 1 },
    });
    expect((resolved as typeof proxy).sampling_parameters).not.toBe(proxy.sampling_parameters);
  });

  it("uses the given api key (a token scoped to the attempt) instead of the resource's", () => {
    expect(resolveForAttempt(proxy, "ro-1", "at-1", { apiKey: "agl1.t.s" })).toMatchObject({
      api_key: "agl1.t.s",
    });
  });

  it("passes other resources through untouched", () => {
    const plain = llm({ endpoint: "http://h:9/v1", model: "m", api_key: "k" });
    expect(resolveForAttempt(plain, "ro-1", "at-1", { apiKey: "ignored" })).toBe(plain);
  });
});
