/**
 * `openStore(uri)`: the store a URI names. `memory:` is the in-memory store; `sqlite:./path.db`,
 * `sqlite:///abs/path.db`, `file:...` or a bare path is the embedded SQLite store (the default whenever
 * a path is given); `postgres://...` / `postgresql://...` is PostgreSQL.
 */
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { InMemoryLightningStore, InvalidArgumentError, type LightningStore } from "@agl/core";
import { PostgresLightningStore, type PostgresStoreOptions } from "./postgres/postgres-store.js";
import { SqliteLightningStore, type SqliteStoreOptions } from "./sqlite/sqlite-store.js";

export interface OpenStoreOptions {
  sqlite?: SqliteStoreOptions;
  postgres?: PostgresStoreOptions;
  /** Options of the in-memory store. */
  memory?: ConstructorParameters<typeof InMemoryLightningStore>[0];
  /**
   * For readers of an existing store: a SQLite file that does not exist is an error instead of a new,
   * empty database (and `memory:` is refused: it can hold no earlier run).
   */
  mustExist?: boolean;
}

export type StoreKind = "memory" | "sqlite" | "postgres";

/** Which backend a URI names and its location (a file path or the connection URL). */
export function parseStoreUri(uri: string): { kind: StoreKind; location: string } {
  const value = uri.trim();
  if (value === "")
    throw new InvalidArgumentError(
      "db",
      "a store URI is required (memory:, sqlite:PATH, PATH or postgres://...)",
    );
  if (value === "memory" || value === "memory:" || value === "memory://")
    return { kind: "memory", location: "" };
  if (/^postgres(ql)?:\/\//i.test(value)) return { kind: "postgres", location: value };
  const sqlite = /^(sqlite|file):(.*)$/i.exec(value);
  if (sqlite) {
    // sqlite:///abs → /abs, sqlite://./rel → ./rel, sqlite:./rel → ./rel
    let path = sqlite[2]!;
    if (path.startsWith("//")) path = path.slice(2);
    if (path === "") throw new InvalidArgumentError("db", `no file path in ${JSON.stringify(uri)}`);
    return { kind: "sqlite", location: path };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    throw new InvalidArgumentError(
      "db",
      `unsupported store URI scheme in ${JSON.stringify(uri)}; use memory:, sqlite:PATH or postgres://`,
    );
  }
  // A bare word ("postgres", "mem") is almost always a mistyped URI, not a file name: silently creating
  // a SQLite file called "postgres" loses the user's data to the wrong place.
  if (!/[/\\.]/.test(value)) {
    throw new InvalidArgumentError(
      "db",
      `${JSON.stringify(uri)} is not a store URI: use memory, sqlite:./${value}.db (or any path with a / or an extension) or postgres://user@host/db`,
    );
  }
  return { kind: "sqlite", location: value };
}

/** One line saying which store a URI opens (passwords masked), for start-up logs. */
export function describeStoreUri(uri: string): string {
  const { kind, location } = parseStoreUri(uri);
  switch (kind) {
    case "memory":
      return "in-memory store (its data is lost when the process exits)";
    case "sqlite":
      return `SQLite store ${resolve(location)}`;
    case "postgres":
      return `PostgreSQL store ${location.replace(/\/\/([^:@/]+):[^@/]*@/, "//$1:***@")}`;
  }
}

export async function openStore(uri: string, options: OpenStoreOptions = {}): Promise<LightningStore> {
  const { kind, location } = parseStoreUri(uri);
  switch (kind) {
    case "memory":
      if (options.mustExist) {
        throw new InvalidArgumentError(
          "db",
          "an in-memory store is empty: name the store that holds the run",
        );
      }
      return new InMemoryLightningStore(options.memory);
    case "sqlite": {
      if (options.mustExist && location !== ":memory:" && !existsSync(resolve(location))) {
        throw new InvalidArgumentError(
          "db",
          `no SQLite store at ${resolve(location)} (the file does not exist)`,
        );
      }
      const dir = dirname(resolve(location));
      if (!existsSync(dir)) {
        throw new InvalidArgumentError(
          "db",
          `directory ${dir} does not exist (SQLite file ${resolve(location)}); create it first`,
        );
      }
      return new SqliteLightningStore(location, options.sqlite);
    }
    case "postgres":
      return PostgresLightningStore.connect(location, options.postgres);
  }
}
