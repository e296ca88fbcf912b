import { InvalidArgumentError } from "@agl/core";
import { describe, expect, it } from "vitest";
import { PolicyModel } from "../model/policy-model.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { PPO } from "./algorithm.js";
import type { PPOProxyOptions } from "./proxy-options.js";

const tokenizer = new Tokenizer({ chars: "ab" });
const policy = {
  model: PolicyModel.create({
    vocabSize: tokenizer.vocabSize,
    dModel: 8,
    nLayers: 1,
    nHeads: 1,
    contextLength: 8,
  }),
  tokenizer,
  template: new ChatTemplate(tokenizer),
};

function fieldOf(proxy: PPOProxyOptions): string {
  try {
    new PPO({ policy, proxy });
  } catch (error) {
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    return (error as InvalidArgumentError).field;
  }
  return "no error";
}

describe("PPO proxy options (workers on other machines)", () => {
  it("are checked at construction, naming the field", () => {
    expect(fieldOf({ publicUrl: "trainer-1:8100" })).toBe("proxy.publicUrl");
    expect(fieldOf({ port: 70000 })).toBe("proxy.port");
    expect(fieldOf({ tokenSecret: "short" })).toBe("proxy.tokenSecret");
    expect(fieldOf({ hots: "0.0.0.0" } as PPOProxyOptions)).toBe("proxy");
    expect(fieldOf({ host: "0.0.0.0", port: 8100, publicUrl: "http://trainer-1:8100" })).toBe("no error");
  });

  it("the token secret runners get is the configured one, else $AGL_PROXY_TOKEN_SECRET", () => {
    const secret = "a-secret-shared-with-the-workers";
    expect(new PPO({ policy, proxy: { tokenSecret: secret } }).runnerCredentials().proxyTokenSecret).toBe(
      secret,
    );
    const saved = process.env.AGL_PROXY_TOKEN_SECRET;
    process.env.AGL_PROXY_TOKEN_SECRET = "secret-from-the-environment";
    try {
      expect(new PPO({ policy }).runnerCredentials().proxyTokenSecret).toBe("secret-from-the-environment");
    } finally {
      if (saved === undefined) delete process.env.AGL_PROXY_TOKEN_SECRET;
      else process.env.AGL_PROXY_TOKEN_SECRET = saved;
    }
    const random = new PPO({ policy }).runnerCredentials().proxyTokenSecret!;
    expect(random.length).toBeGreaterThanOrEqual(16);
  });
});
