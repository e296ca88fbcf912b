import { describe, expect, it } from "vitest";
import type { RolloutContext } from "../agent/types.js";
import { InvalidArgumentError } from "../errors.js";
import { silentLogger } from "../logger.js";
import type { Algorithm } from "../trainer/algorithm.js";
import { Baseline } from "../trainer/baseline.js";
import { Trainer } from "../trainer/trainer.js";
import { llm, proxyLLM } from "../types/resources.js";
import { DEFAULT_SCOPED_TOKEN_TTL_SECONDS, generateTokenSecret, ScopedTokenSigner } from "./scoped-token.js";

const SECRET = "a-secret-of-at-least-16-bytes";

describe("ScopedTokenSigner", () => {
  const signer = new ScopedTokenSigner(SECRET);

  it("round-trips the attempt it was minted for", () => {
    const token = signer.mint("ro-1", "at-1", { ttlSeconds: 100 });
    expect(token.split(".")).toHaveLength(3);
    const claims = signer.verify(token);
    expect(claims).toMatchObject({ rolloutId: "ro-1", attemptId: "at-1" });
    expect(claims!.expiresAt).toBeGreaterThan(Date.now() / 1000 + 90);
    // Without a TTL: the default lifetime; only an explicit null never expires.
    const defaulted = signer.verify(signer.mint("ro-1", "at-1"))!.expiresAt!;
    expect(Math.abs(defaulted - (Date.now() / 1000 + DEFAULT_SCOPED_TOKEN_TTL_SECONDS))).toBeLessThan(5);
    expect(signer.verify(signer.mint("ro-1", "at-1", { ttlSeconds: null }))?.expiresAt).toBeNull();
  });

  it("rejects expired, forged, tampered and foreign tokens", () => {
    const expired = signer.mint("ro-1", "at-1", { ttlSeconds: -1 });
    expect(signer.verify(expired)).toBeNull();
    expect(signer.decode(expired)?.rolloutId).toBe("ro-1");
    expect(signer.verify(new ScopedTokenSigner(`${SECRET}-other`).mint("ro-1", "at-1"))).toBeNull();
    const [prefix, , sig] = signer.mint("ro-1", "at-1").split(".");
    const swapped = Buffer.from(JSON.stringify({ r: "ro-2", a: "at-2", e: null })).toString("base64url");
    expect(signer.verify(`${prefix}.${swapped}.${sig}`)).toBeNull();
    for (const bad of ["", "admin-token", "agl1.x", "agl1.a.b.c", "bearer agl1.a.b"]) {
      expect(signer.verify(bad)).toBeNull();
    }
  });

  it("names the bad argument", () => {
    expect(() => new ScopedTokenSigner("short")).toThrow(/Invalid secret: .*16 bytes/);
    expect(() => signer.mint("", "at-1")).toThrow(InvalidArgumentError);
    expect(() => signer.mint("ro-1", "")).toThrow(/Invalid attemptId/);
    expect(() => signer.mint("ro-1", "at-1", { ttlSeconds: Number.NaN })).toThrow(/Invalid ttlSeconds/);
    expect(generateTokenSecret()).not.toBe(generateTokenSecret());
    expect(Buffer.byteLength(generateTokenSecret())).toBeGreaterThanOrEqual(16);
  });
});

describe("Trainer hands the proxy token secret to its runners", () => {
  async function keysSeen(options: { trainerSecret?: string; algorithmSecret?: string }) {
    const keys: Array<{ key: string | null; rid: string; aid: string }> = [];
    const agent = async (_task: unknown, { llm: l, rollout }: RolloutContext) => {
      keys.push({ key: l!.api_key, rid: rollout.rollout_id, aid: rollout.attempt.attempt_id });
      return 1;
    };
    const baseline = new Baseline();
    const algorithm: Algorithm = {
      run: (ctx) => baseline.run(ctx),
      ...(options.algorithmSecret
        ? { runnerCredentials: () => ({ proxyTokenSecret: options.algorithmSecret }) }
        : {}),
    };
    const trainer = new Trainer({
      algorithm,
      initialResources: {
        main_llm: proxyLLM({ endpoint: "http://127.0.0.1:1/v1", model: "m", api_key: "own" }),
      },
      logger: silentLogger,
      ...(options.trainerSecret ? { proxyTokenSecret: options.trainerSecret } : {}),
    });
    await trainer.fit(agent, [1, 2]);
    return keys;
  }

  it("uses the algorithm's runnerCredentials() over the Trainer option", async () => {
    const keys = await keysSeen({ trainerSecret: `${SECRET}-trainer`, algorithmSecret: SECRET });
    expect(keys).toHaveLength(2);
    for (const { key, rid, aid } of keys) {
      expect(new ScopedTokenSigner(SECRET).verify(key!)).toMatchObject({ rolloutId: rid, attemptId: aid });
    }
  });

  it("uses the Trainer option when the algorithm supplies none, and the resource's key without either", async () => {
    for (const { key, rid } of await keysSeen({ trainerSecret: `${SECRET}-trainer` })) {
      expect(new ScopedTokenSigner(`${SECRET}-trainer`).verify(key!)?.rolloutId).toBe(rid);
    }
    expect((await keysSeen({})).map((k) => k.key)).toEqual(["own", "own"]);
  });

  it("leaves plain LLM resources' keys alone", async () => {
    const seen: Array<string | null> = [];
    const trainer = new Trainer({
      proxyTokenSecret: SECRET,
      initialResources: { main_llm: llm({ endpoint: "http://127.0.0.1:1/v1", model: "m", api_key: "k" }) },
      logger: silentLogger,
    });
    await trainer.dev(async (_t: unknown, { llm: l }: RolloutContext) => void seen.push(l!.api_key), [1]);
    expect(seen).toEqual(["k"]);
  });

  it("names a bad secret", async () => {
    expect(() => new Trainer({ proxyTokenSecret: "short" })).toThrow(/trainer\.proxyTokenSecret/);
    const trainer = new Trainer({
      algorithm: { run: async () => null, runnerCredentials: () => ({ proxyTokenSecret: "short" }) },
      logger: silentLogger,
    });
    await expect(trainer.fit(async () => 1, [])).rejects.toThrow(
      /algorithm\.runnerCredentials\(\)\.proxyTokenSecret/,
    );
  });
});
