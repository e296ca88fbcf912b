import { InMemoryLightningStore, proxyLLMBaseUrl } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram, proxyOptionsFromArgs } from "./cli.js";
import { LLMProxy } from "./proxy.js";

describe("public URL (proxy reached from other machines)", () => {
  let mock: Awaited<ReturnType<typeof startMockLLMServer>>;
  beforeAll(async () => {
    mock = await startMockLLMServer({ port: 0 });
  });
  afterAll(async () => {
    await mock.close();
  });

  it("binds one address and publishes another in the ProxyLLM, which answers through that address", async () => {
    const proxy = new LLMProxy({
      store: new InMemoryLightningStore(),
      backends: [{ url: mock.baseURL }],
      host: "0.0.0.0",
      model: "m",
      publicUrl: "http://127.0.0.2:1/",
      healthCheckIntervalMs: 0,
    });
    await proxy.start();
    try {
      const port = new URL(proxy.url).port;
      expect(proxy.url).toBe(`http://127.0.0.1:${port}`);
      expect(proxy.publicUrl).toBe("http://127.0.0.2:1");
      const resource = proxy.asResource();
      expect(resource.endpoint).toBe("http://127.0.0.2:1/v1");
      expect(proxyLLMBaseUrl(resource, "ro-1", "at-1")).toBe(
        "http://127.0.0.2:1/rollout/ro-1/attempt/at-1/v1",
      );
      // Bound on every interface, so another loopback alias (standing in for another host) reaches it.
      const res = await fetch(`http://127.0.0.2:${port}/v1/models`);
      expect(res.status).toBe(200);
    } finally {
      await proxy.stop();
    }
  });

  it("without a public URL the bound address is published; a bad public URL is refused naming the field", async () => {
    const proxy = new LLMProxy({
      store: new InMemoryLightningStore(),
      backends: [{ url: mock.baseURL }],
      model: "m",
      healthCheckIntervalMs: 0,
    });
    await proxy.start();
    try {
      expect(proxy.asResource().endpoint).toBe(`${proxy.url}/v1`);
    } finally {
      await proxy.stop();
    }
    expect(
      () =>
        new LLMProxy({
          store: new InMemoryLightningStore(),
          backends: [{ url: mock.baseURL }],
          publicUrl: "trainer-1:8100",
        }),
    ).toThrow(/publicUrl/);
    expect(
      () =>
        new LLMProxy({
          store: new InMemoryLightningStore(),
          backends: [{ url: mock.baseURL }],
          publicUrl: "ftp://h/",
        }),
    ).toThrow(/publicUrl/);
  });

  it("agl-proxy takes --public-url, or AGL_PROXY_PUBLIC_URL", () => {
    const parse = (args: string[], env: NodeJS.ProcessEnv) => {
      const program = buildProgram().exitOverride();
      program.parse(["node", "agl-proxy", "--backend", "http://a:1/v1", ...args]);
      return proxyOptionsFromArgs(program.opts(), env);
    };
    expect(parse(["--public-url", "http://trainer-1:8100"], {}).publicUrl).toBe("http://trainer-1:8100");
    expect(parse([], { AGL_PROXY_PUBLIC_URL: "http://p:1" }).publicUrl).toBe("http://p:1");
    expect(parse([], {}).publicUrl).toBeNull();
  });
});
