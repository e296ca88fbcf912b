import { describeStoreConformance, describeStoreModel } from "@agl/core/testing";
import { PostgresLightningStore } from "@agl/store";
import pg from "pg";
import { afterAll } from "vitest";
import { createTestDatabase } from "../support/postgres.js";
import { remoteFactory } from "./support.js";

// One database for this file and a fresh schema per test: much cheaper than a database per test.
const database = createTestDatabase();
let counter = 0;

afterAll(async () => {
  await (await database).drop();
});

const factory = remoteFactory(async () => {
  const { url } = await database;
  const schema = `agl_http_${process.pid}_${counter++}`;
  return {
    store: await PostgresLightningStore.connect(url, { schema }),
    cleanup: async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
});

describeStoreConformance("LightningStoreClient → server → PostgreSQL", factory, { timeScale: 2 });
describeStoreModel("LightningStoreClient → server → PostgreSQL", factory, { numRuns: 15 });
