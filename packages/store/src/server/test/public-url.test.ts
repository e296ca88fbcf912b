import { InMemoryLightningStore, InvalidArgumentError } from "@agl/core";
import { describe, expect, it } from "vitest";
import { silentServerLogger } from "../logging.js";
import { startStoreServer } from "../server.js";

describe("store server public URL", () => {
  it("is the bound address unless given; given, it is logged and returned without a trailing slash", async () => {
    const plain = await startStoreServer({
      store: new InMemoryLightningStore(),
      port: 0,
      logger: silentServerLogger,
    });
    expect(plain.publicUrl).toBe(plain.url);
    await plain.close();

    const lines: Array<[string, Record<string, unknown> | undefined]> = [];
    const logger = {
      ...silentServerLogger,
      info: (msg: string, fields?: Record<string, unknown>) => lines.push([msg, fields]),
    };
    const server = await startStoreServer({
      store: new InMemoryLightningStore(),
      host: "0.0.0.0",
      port: 0,
      publicUrl: "http://store-1:4747/",
      logger,
    });
    expect(server.url).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/);
    expect(server.publicUrl).toBe("http://store-1:4747");
    expect(lines).toContainEqual([
      "store server listening",
      { url: server.url, public_url: "http://store-1:4747" },
    ]);
    await server.close();
  });

  it("refuses what is not the root URL of an http(s) server, naming the option", async () => {
    for (const bad of ["store-1:4747", "ftp://store-1", "http://store-1:4747/v1/agl"]) {
      const error = await startStoreServer({
        store: new InMemoryLightningStore(),
        port: 0,
        publicUrl: bad,
        logger: silentServerLogger,
      }).catch((e) => e);
      expect(InvalidArgumentError.isInstance(error) && error.field).toBe("publicUrl");
    }
  });
});
