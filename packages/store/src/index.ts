// Store server (HTTP: REST v0.3, OTLP ingest, legacy task API).

export {
  describeStoreUri,
  type OpenStoreOptions,
  openStore,
  parseStoreUri,
  type StoreKind,
} from "./open-store.js";
export { migratePostgres, POSTGRES_MIGRATIONS } from "./postgres/migrations.js";
export {
  PostgresLightningStore,
  type PostgresStoreOptions,
  PostgresStoreOptionsSchema,
} from "./postgres/postgres-store.js";
export * from "./server/index.js";
export type { DurableStoreOptions } from "./shared/schemas.js";
export { migrateSqlite, SQLITE_MIGRATIONS } from "./sqlite/migrations.js";
// Durable stores (SQLite, PostgreSQL) and openStore(uri).
export {
  SqliteLightningStore,
  type SqliteStoreOptions,
  SqliteStoreOptionsSchema,
} from "./sqlite/sqlite-store.js";
