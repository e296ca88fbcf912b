import { InvalidArgumentError } from "@agl/core";
import { describe, expect, it } from "vitest";
import { LightningStoreClient } from "./store-client.js";
import { Worker } from "./worker.js";

function fieldOf(f: () => unknown): { field: string; message: string } | "no error" {
  try {
    f();
  } catch (e) {
    expect(InvalidArgumentError.isInstance(e)).toBe(true);
    return { field: (e as InvalidArgumentError).field, message: (e as Error).message };
  }
  return "no error";
}

const agent = async () => 1;

describe("strict options: misspelled keys and scheme-less URLs are errors", () => {
  it("LightningStoreClient", () => {
    expect(fieldOf(() => new LightningStoreClient({ url: "http://h:1", tokne: "t" } as never))).toMatchObject(
      {
        field: "storeClient.tokne",
        message: expect.stringContaining('unknown option "tokne"'),
      },
    );
    expect(fieldOf(() => new LightningStoreClient({ url: "127.0.0.1:4747" }))).toMatchObject({
      field: "storeClient.url",
      message: expect.stringContaining('did you mean "http://127.0.0.1:4747"'),
    });
    expect(fieldOf(() => new LightningStoreClient("localhost:4747"))).toMatchObject({
      field: "storeClient.url",
    });
  });

  it("Worker", () => {
    expect(fieldOf(() => new Worker({ store: "http://h:1", agent, tokn: "t" } as never))).toMatchObject({
      field: "worker.tokn",
    });
    expect(fieldOf(() => new Worker({ store: "127.0.0.1:4747", agent }))).toMatchObject({
      field: "worker.store",
    });
  });
});
