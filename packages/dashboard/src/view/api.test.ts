import { describe, expect, it } from "vitest";
import { StoreApi, StoreHttpError, StoreUnreachableError, UnauthorizedError } from "./api.js";

function api(
  answer: (url: string, init: RequestInit) => Response | Promise<Response>,
  token: string | null = "tok",
) {
  const calls: Array<{ url: string; init: RequestInit }> = [];
  const client = new StoreApi({
    baseUrl: "http://store",
    token: () => token,
    fetch: (async (url: string, init: RequestInit) => {
      calls.push({ url, init });
      return answer(url, init);
    }) as typeof fetch,
  });
  return { client, calls };
}

describe("StoreApi", () => {
  it("sends v0.3 search bodies without null keys, and the bearer token", async () => {
    const { client, calls } = api(() => Response.json({ items: [], limit: 50, offset: 100, total: 0 }));
    await client.queryRollouts({
      statusIn: ["failed"],
      sortBy: "start_time",
      sortOrder: "desc",
      limit: 50,
      offset: 100,
    });
    await client.queryRollouts({ limit: 50, offset: 0 });
    expect(calls[0]!.url).toBe("http://store/v1/agl/rollouts/search");
    expect(JSON.parse(String(calls[0]!.init.body))).toEqual({
      status_in: ["failed"],
      sort_by: "start_time",
      sort_order: "desc",
      limit: 50,
      offset: 100,
    });
    expect(JSON.parse(String(calls[1]!.init.body))).toEqual({ limit: 50, offset: 0 });
    expect((calls[0]!.init.headers as Record<string, string>).authorization).toBe("Bearer tok");
  });

  it("sends the agl-ts mode / data-id filters, and tells an agl-ts store from another by its marker header", async () => {
    const { client, calls } = api((url) =>
      url.endsWith("/statistics")
        ? Response.json({ name: "SqliteLightningStore" }, { headers: { "x-agl-server": "agl-ts" } })
        : Response.json({ items: [], limit: 50, offset: 0, total: 0 }),
    );
    await client.queryRollouts({ modeIn: ["val"], dataIdContains: "s-3", limit: 50, offset: 0 });
    expect(JSON.parse(String(calls[0]!.init.body))).toEqual({
      mode_in: ["val"],
      data_id_contains: "s-3",
      limit: 50,
      offset: 0,
    });
    await expect(client.storeKind()).resolves.toBe("agl-ts");
    await expect(client.storeKind()).resolves.toBe("agl-ts");
    expect(calls.filter((c) => c.url.endsWith("/statistics"))).toHaveLength(1);

    const python = api(() => Response.json({ name: "InMemoryLightningStore" }));
    await expect(python.client.storeKind()).resolves.toBe("agentlightning");
    // A failed look-up is not cached: the next call asks again.
    let up = false;
    const flaky = api(() => {
      if (!up) throw new TypeError("connection refused");
      return Response.json({}, { headers: { "x-agl-server": "agl-ts" } });
    });
    await expect(flaky.client.storeKind()).rejects.toBeInstanceOf(StoreUnreachableError);
    up = true;
    await expect(flaky.client.storeKind()).resolves.toBe("agl-ts");
  });

  it("maps 401, 5xx gateways, other errors and network failures to typed errors", async () => {
    await expect(
      api(() => Response.json({ detail: "Invalid bearer token" }, { status: 401 })).client.health(),
    ).rejects.toThrow(UnauthorizedError);
    await expect(api(() => new Response("bad gateway", { status: 502 })).client.health()).rejects.toThrow(
      StoreUnreachableError,
    );
    const err = await api(() => Response.json({ detail: "sort_by: cannot sort" }, { status: 400 }))
      .client.statistics()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreHttpError);
    expect((err as StoreHttpError).status).toBe(400);
    expect((err as StoreHttpError).detail).toBe("sort_by: cannot sort");
    await expect(
      api(() => {
        throw new TypeError("fetch failed");
      }).client.health(),
    ).rejects.toThrow(StoreUnreachableError);
  });

  it("reads every span of an attempt page by page", async () => {
    const all = Array.from({ length: 2500 }, (_, i) => ({ span_id: `s${i}` }));
    const { client, calls } = api((_url, init) => {
      const body = JSON.parse(String(init.body)) as { limit: number; offset: number; attempt_id?: string };
      expect(body.attempt_id).toBe("at-1");
      return Response.json({
        items: all.slice(body.offset, body.offset + body.limit),
        limit: body.limit,
        offset: body.offset,
        total: all.length,
      });
    });
    const { spans, total } = await client.querySpans("ro-1", "at-1");
    expect(total).toBe(2500);
    expect(spans).toHaveLength(2500);
    expect(calls).toHaveLength(3);
  });
});
