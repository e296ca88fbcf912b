import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

/** One proxy in front of a server with one adapter per role: routing by model name, the policy on each span. */
describe("multi-policy routing", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      backendModels: ["base"],
      proxy: {
        policies: {
          planner: { policy: "planner" },
          checker: { policy: "checker", model: "checker-v0" },
          judge: { policy: null, model: "base" },
        },
      },
    });
  });
  afterAll(() => h.close());

  const ask = async (base: string, model: string) => {
    const res = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: `hi ${model}` }], max_tokens: 4 }),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it("routes each model name to its backend name and records the policy on the span", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const base = `${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`;
    const before = h.taps[0]!.exchanges.length;
    for (const m of ["planner", "checker", "judge", "planner"]) expect((await ask(base, m)).status).toBe(200);
    const sent = h.taps[0]!.exchanges.slice(before).map((e) => JSON.parse(e.requestBody).model);
    expect(sent).toEqual(["planner", "checker-v0", "base", "planner"]);
    const spans = await h.spans(rolloutId);
    const bySeq = [...spans].sort((a, b) => a.sequence_id - b.sequence_id);
    expect(bySeq.map((s) => (s.attributes as any)["agl.proxy.policy"])).toEqual([
      "planner",
      "checker",
      undefined,
      "planner",
    ]);
  });

  it("a name that is neither a policy nor the proxy's model is a 404 naming the field", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const r = await ask(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`, "executor");
    expect(r.status).toBe(404);
    expect(r.body.error).toMatchObject({ param: "model", code: "model_not_found" });
    expect(r.body.error.message).toMatch(/planner, checker, judge, policy/);
    // The proxy's own model name still routes as before (single-policy calls).
    expect((await ask(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`, "policy")).status).toBe(200);
  });

  it("setPolicyModel points a policy at a new served name (a new adapter version); unknown routes throw", async () => {
    h.proxy.setPolicyModel("checker", "checker-v1");
    const { rolloutId, attemptId } = await h.newAttempt();
    const before = h.taps[0]!.exchanges.length;
    await ask(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`, "checker");
    expect(JSON.parse(h.taps[0]!.exchanges[before]!.requestBody).model).toBe("checker-v1");
    expect(() => h.proxy.setPolicyModel("executor", "x")).toThrow(/no policy route/);
    const models = (await (await fetch(`${h.url}/v1/models`)).json()) as any;
    expect(models.data.map((m: any) => m.id)).toEqual(
      expect.arrayContaining(["planner", "checker", "judge"]),
    );
  });
});
