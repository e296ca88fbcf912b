import { InMemoryLightningStore } from "@agl/core";
import { describe, expect, it } from "vitest";
import { createStoreApp } from "./app.js";
import { silentServerLogger } from "./logging.js";

describe("GET /v1/agl/openapi.json", () => {
  it("lists every route with bodies and answers typed from the zod schemas", async () => {
    const store = new InMemoryLightningStore();
    const app = createStoreApp(store, { logger: silentServerLogger, token: "t" });
    const res = await app.request("/v1/agl/openapi.json", { headers: { authorization: "Bearer t" } });
    expect(res.status).toBe(200);
    const doc = (await res.json()) as {
      openapi: string;
      info: { version: string };
      paths: Record<string, Record<string, any>>;
      components: { schemas: Record<string, any> };
    };
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.version).toMatch(/^\d+\.\d+\.\d+/);
    // Every concrete route of the app is in the table.
    for (const route of app.routes) {
      if (route.method === "ALL" || route.path.includes("*")) continue;
      const path = route.path.replace(/:(\w+)/g, "{$1}");
      expect(doc.paths[path]?.[route.method.toLowerCase()], `${route.method} ${path}`).toBeDefined();
    }
    const start = doc.paths["/v1/agl/rollouts"]!.post;
    expect(start.requestBody.content["application/json"].schema.$ref).toBe(
      "#/components/schemas/StartRolloutRequest",
    );
    const update = doc.paths["/v1/agl/rollouts/{rid}/attempts/{aid}"]!.post;
    expect(update.parameters.map((p: { name: string }) => p.name)).toEqual(["rid", "aid"]);
    expect(doc.components.schemas.Rollout.properties.status.enum).toContain("queuing");
    expect(doc.paths["/v1/traces"]?.post).toBeDefined();
    await store.close();
  });
});
