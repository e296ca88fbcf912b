import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScopedTokenIssuer } from "./scoped-tokens.js";
import { type Harness, startHarness } from "./test-support/harness.js";

const ADMIN = "admin-token-0123456789";
const messages = [{ role: "user" as const, content: "hi" }];

describe("per-attempt scoped tokens and the admin token", () => {
  let h: Harness;
  let mine: { rolloutId: string; attemptId: string };
  let other: { rolloutId: string; attemptId: string };
  let token: string;
  beforeAll(async () => {
    h = await startHarness({ proxy: { adminToken: ADMIN, maxBodyBytes: 4096 } });
    mine = await h.newAttempt();
    other = await h.newAttempt();
    token = h.proxy.mintAttemptToken(mine.rolloutId, mine.attemptId);
  });
  afterAll(() => h.close());

  const post = (path: string, headers: Record<string, string>, body: unknown = { model: "m", messages }) =>
    fetch(`${h.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });

  it("lets a token make its own attempt's calls, by path, by header, or by the token alone", async () => {
    const llm = h.proxy.resolveForAttempt(
      h.proxy.asResource({ model: "policy" }),
      mine.rolloutId,
      mine.attemptId,
    );
    expect(llm.endpoint).toBe(`${h.url}/rollout/${mine.rolloutId}/attempt/${mine.attemptId}/v1`);
    await h.client(llm.endpoint, { apiKey: llm.api_key! }).chat.completions.create({ model: "m", messages });
    await h.client(`${h.url}/v1`, { apiKey: token }).chat.completions.create({ model: "m", messages });
    const byHeader = await post("/v1/chat/completions", {
      "x-api-key": token,
      "x-rollout-id": mine.rolloutId,
      "x-attempt-id": mine.attemptId,
    });
    expect(byHeader.status).toBe(200);
    const spans = await h.spans(mine.rolloutId);
    expect(spans.map((s) => s.attributes["agl.proxy.attribution"])).toEqual(["path", "token", "header"]);
  });

  it("cannot write into another attempt by any attribution style", async () => {
    const auth = { authorization: `Bearer ${token}` };
    const attempts = [
      post(`/rollout/${other.rolloutId}/attempt/${other.attemptId}/v1/chat/completions`, auth),
      post(`/rollout/${mine.rolloutId}/attempt/${other.attemptId}/v1/chat/completions`, auth),
      post(
        `/proxy/rollout/${other.rolloutId}/attempt/${other.attemptId}/mode/train/openai/v1/chat/completions`,
        auth,
      ),
      post("/v1/chat/completions", {
        ...auth,
        "x-rollout-id": other.rolloutId,
        "x-attempt-id": other.attemptId,
      }),
      post("/v1/chat/completions", { ...auth, trace_id: other.rolloutId }),
    ];
    for (const res of await Promise.all(attempts)) expect(res.status).toBe(403);
    h.proxy.createSession("other-session", other);
    expect((await post("/other-session/v1/chat/completions", auth)).status).toBe(403);
    await h.proxy.flush();
    expect((await h.store.querySpans(other.rolloutId)).items).toHaveLength(0);
  });

  it("cannot read another attempt's session, nor create, delete or control anything", async () => {
    h.proxy.createSession("my-session", mine);
    const auth = { authorization: `Bearer ${token}` };
    expect((await fetch(`${h.url}/sessions/my-session`, { headers: auth })).status).toBe(200);
    expect((await fetch(`${h.url}/sessions/other-session`, { headers: auth })).status).toBe(403);
    expect((await post("/sessions/other-session/complete", auth, {})).status).toBe(403);
    expect((await fetch(`${h.url}/sessions/other-session`, { method: "DELETE", headers: auth })).status).toBe(
      403,
    );
    expect((await post("/sessions/new-one", auth, {})).status).toBe(403);
    expect((await post("/proxy/pause", auth, {})).status).toBe(401);
    expect(
      (await post("/proxy/tokens", auth, { rollout_id: other.rolloutId, attempt_id: other.attemptId }))
        .status,
    ).toBe(401);
    expect(h.proxy.state().paused).toBe(false);
  });

  it("rejects missing, forged, tampered and expired tokens; the admin token may do anything", async () => {
    const path = `/rollout/${mine.rolloutId}/attempt/${mine.attemptId}/v1/chat/completions`;
    expect((await post(path, {})).status).toBe(401);
    const forged = new ScopedTokenIssuer("another-secret-of-16+").mint(mine.rolloutId, mine.attemptId);
    expect((await post(path, { authorization: `Bearer ${forged}` })).status).toBe(401);
    const [p, payload, sig] = token.split(".");
    const swapped = Buffer.from(JSON.stringify({ r: other.rolloutId, a: other.attemptId, e: null })).toString(
      "base64url",
    );
    expect((await post(path, { authorization: `Bearer ${p}.${swapped}.${sig}` })).status).toBe(401);
    expect(payload).toBeTruthy();
    const expired = h.proxy.mintAttemptToken(mine.rolloutId, mine.attemptId, { ttlSeconds: -1 });
    expect((await post(path, { authorization: `Bearer ${expired}` })).status).toBe(401);
    expect((await post(path, { authorization: `Bearer ${ADMIN}` })).status).toBe(200);
    const minted = await post(
      "/proxy/tokens",
      { authorization: `Bearer ${ADMIN}` },
      { rollout_id: other.rolloutId, attempt_id: other.attemptId },
    );
    expect(minted.status).toBe(201);
    const { token: otherToken } = await minted.json();
    const ok = await post(`/rollout/${other.rolloutId}/attempt/${other.attemptId}/v1/chat/completions`, {
      "x-api-key": otherToken,
    });
    expect(ok.status).toBe(200);
  });

  it("enforces the body size limit on LLM and control routes", async () => {
    const big = { model: "m", messages: [{ role: "user", content: "x".repeat(5000) }] };
    const res = await post(
      `/rollout/${mine.rolloutId}/attempt/${mine.attemptId}/v1/chat/completions`,
      { "x-api-key": ADMIN },
      big,
    );
    expect(res.status).toBe(413);
    const ctl = await post("/sessions/s-big", { "x-api-key": ADMIN }, { rollout_id: "x".repeat(5000) });
    expect(ctl.status).toBe(413);
  });
});
