import { InMemoryLightningStore, InvalidArgumentError } from "@agl/core";
import { describe, expect, it } from "vitest";
import { startStoreServer } from "./server.js";

describe("startStoreServer options", () => {
  it("a misspelled `tokn` is an error naming it, not an open server", async () => {
    const store = new InMemoryLightningStore();
    try {
      const error = await startStoreServer({ store, port: 0, tokn: "secret" } as never).catch(
        (e: unknown) => e,
      );
      expect(InvalidArgumentError.isInstance(error)).toBe(true);
      expect(error).toMatchObject({ field: "storeServer.tokn" });
      expect((error as Error).message).toMatch(/unknown option "tokn" \(known: .*token/);
      await expect(startStoreServer({ store, port: 0, token: 5 } as never)).rejects.toMatchObject({
        field: "storeServer.token",
      });
    } finally {
      await store.close();
    }
  });
});
