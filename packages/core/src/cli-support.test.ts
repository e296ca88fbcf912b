import { describe, expect, it } from "vitest";
import { secretToEnv } from "./cli-support.js";
import { InvalidArgumentError } from "./errors.js";
import { llm } from "./types/resources.js";

describe("secretToEnv", () => {
  it("puts the secret in the environment under a fresh name; the resource carries only the name", () => {
    const a = secretToEnv("sk-one", "MY_KEY");
    const b = secretToEnv("sk-two", "MY_KEY");
    expect(a).toMatch(/^MY_KEY_[0-9A-F]{12}$/);
    expect(b).not.toBe(a);
    expect([process.env[a], process.env[b]]).toEqual(["sk-one", "sk-two"]);
    const resource = llm({ endpoint: "http://127.0.0.1:9/v1", model: "m", api_key_env: a });
    expect(JSON.stringify(resource)).not.toContain("sk-one");
    delete process.env[a];
    delete process.env[b];
  });

  it("a prefix that is no variable name is a typed error", () => {
    expect(() => secretToEnv("x", "my-key")).toThrow(InvalidArgumentError);
  });
});
