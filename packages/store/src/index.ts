// Store server (HTTP: REST v0.3, OTLP ingest, legacy task API).
export * from "./server/index.js";

// Durable stores (SQLite, PostgreSQL) and openStore(uri).
export { SqliteLightningStore, SqliteStoreOptionsSchema, type SqliteStoreOptions } from "./sqlite/sqlite-store.js";
export { SQLITE_MIGRATIONS, migrateSqlite } from "./sqlite/migrations.js";
export {
  PostgresLightningStore,
  PostgresStoreOptionsSchema,
  type PostgresStoreOptions,
} from "./postgres/postgres-store.js";
export { POSTGRES_MIGRATIONS, migratePostgres } from "./postgres/migrations.js";
export { openStore, parseStoreUri, type OpenStoreOptions, type StoreKind } from "./open-store.js";
export type { DurableStoreOptions } from "./shared/schemas.js";
