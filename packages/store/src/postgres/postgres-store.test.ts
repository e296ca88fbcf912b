import { describeStoreConformance, describeStoreModel } from "@agl/core/testing";
import { afterAll, beforeAll } from "vitest";
import { createTestDatabase } from "../../../../test/support/postgres.js";
import { PostgresLightningStore } from "./postgres-store.js";

let db: { url: string; drop: () => Promise<void> };
let counter = 0;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

// Each store gets its own schema in this file's database: fresh tables at the cost of one migration.
const factory = async () => {
  const schema = `t${process.pid}_${counter++}`;
  const store = await PostgresLightningStore.connect(db.url, { schema, poolSize: 4 });
  return {
    store,
    cleanup: async () => {
      const pg = (await import("pg")).default;
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      await client.query(`DROP SCHEMA ${schema} CASCADE`);
      await client.end();
    },
  };
};

describeStoreConformance("PostgresLightningStore", factory);
describeStoreModel("PostgresLightningStore", factory, { numRuns: 25 });
