/**
 * Translation of the store-neutral query spec of @agl/core (FilterSpec + NormalizedPage) into SQL, so
 * the durable stores filter, sort and page exactly like `queryItems` in memory:
 * - exact / within (an empty list matches nothing) / contains (case-sensitive substring);
 * - stable sort: ties keep insertion order (the table's serial key) in both directions;
 * - `*_time` fields sort nulls last in both orders; other nullable columns compare a null as "" or 0.
 * Fields without a scalar column (JSON values) are sorted in JS with the core comparator instead.
 */
import type { FieldCondition, FilterSpec, NormalizedPage } from "@agl/core";
import { isTimeField } from "@agl/core";

export interface Dialect {
  /** Register a bound value and return its placeholder. */
  bind(params: unknown[], value: unknown): string;
  /** `col IN values`; never called with an empty list. */
  within(column: string, values: readonly unknown[], params: unknown[]): string;
  /** Case-sensitive substring test. */
  contains(column: string, placeholder: string): string;
  /** The string under `key` of a JSON object column, or NULL when it is missing or not a string. */
  jsonString(column: string, key: string, params: unknown[]): string;
  /** Collation suffix that makes text order code-point order. */
  textCollation: string;
}

export const sqliteDialect: Dialect = {
  bind(params, value) {
    params.push(value);
    return "?";
  },
  // One JSON parameter keeps the SQL text (and so the cached prepared statement) the same for any list length.
  within(column, values, params) {
    return `${column} IN (SELECT value FROM json_each(${this.bind(params, JSON.stringify(values))}))`;
  },
  contains: (column, placeholder) => `instr(${column}, ${placeholder}) > 0`,
  jsonString(column, key, params) {
    const path = `$.${JSON.stringify(key)}`;
    const type = this.bind(params, path);
    const value = this.bind(params, path);
    return `(CASE WHEN json_type(${column}, ${type}) = 'text' THEN json_extract(${column}, ${value}) END)`;
  },
  textCollation: "",
};

export const postgresDialect: Dialect = {
  bind(params, value) {
    params.push(value);
    return `$${params.length}`;
  },
  within(column, values, params) {
    return `${column} = ANY(${this.bind(params, values)})`;
  },
  contains: (column, placeholder) => `strpos(${column}, ${placeholder}) > 0`,
  jsonString(column, key, params) {
    const k = this.bind(params, key);
    return `(CASE WHEN jsonb_typeof(${column} -> ${k}::text) = 'string' THEN ${column} ->> ${k}::text END)`;
  },
  textCollation: ' COLLATE "C"',
};

export type ColumnKind = "text" | "number" | "time";

/** The scalar columns of a table that can be filtered and sorted in SQL, keyed by model field. */
export type ColumnMap = Readonly<Record<string, ColumnKind>>;

export interface SqlQueryParts {
  where: string;
  /** ORDER BY clause (without the keywords), or null when the sort must happen in JS. */
  orderBy: string | null;
  params: unknown[];
}

function conditionSql<T>(
  cond: FieldCondition<T>,
  columns: ColumnMap,
  dialect: Dialect,
  params: unknown[],
): string {
  const column = cond.key === undefined ? cond.field : dialect.jsonString(cond.field, cond.key, params);
  if (cond.key === undefined && !(column in columns)) {
    throw new Error(`field ${column} cannot be filtered in SQL`);
  }
  switch (cond.op) {
    case "exact":
      return `${column} = ${dialect.bind(params, cond.value)}`;
    case "within": {
      const values = cond.values.filter((v) => v !== null && v !== undefined);
      return values.length === 0 ? "1 = 0" : dialect.within(column, values, params);
    }
    case "contains":
      return dialect.contains(column, dialect.bind(params, cond.value));
  }
}

/** WHERE clause for a filter spec; `extra` conditions (already SQL) are ANDed in. */
export function whereSql<T>(
  filter: FilterSpec<T>,
  columns: ColumnMap,
  dialect: Dialect,
  params: unknown[],
  extra: readonly string[] = [],
): string {
  const parts = [...extra, ...(filter.must ?? []).map((c) => conditionSql(c, columns, dialect, params))];
  const conds = (filter.conditions ?? []).map((c) => conditionSql(c, columns, dialect, params));
  if (conds.length > 0) parts.push(`(${conds.join(filter.logic === "or" ? " OR " : " AND ")})`);
  return parts.length === 0 ? "1 = 1" : parts.join(" AND ");
}

/**
 * ORDER BY for a normalised page, or null when `sortBy` has no scalar column. `insertionKey` breaks
 * ties (and is the whole order when nothing is sorted).
 */
export function orderBySql(
  page: NormalizedPage,
  columns: ColumnMap,
  dialect: Dialect,
  insertionKey: string,
): string | null {
  if (page.sortBy === null) return `${insertionKey} ASC`;
  const kind = columns[page.sortBy];
  if (kind === undefined) return null;
  const dir = page.sortOrder === "desc" ? "DESC" : "ASC";
  const col = page.sortBy;
  if (kind === "time" || isTimeField(col)) return `(${col} IS NULL) ASC, ${col} ${dir}, ${insertionKey} ASC`;
  if (kind === "number") return `COALESCE(${col}, 0) ${dir}, ${insertionKey} ASC`;
  return `COALESCE(${col}, '')${dialect.textCollation} ${dir}, ${insertionKey} ASC`;
}

/** LIMIT/OFFSET suffix for a normalised page. */
export function limitSql(page: NormalizedPage, dialect: Dialect, params: unknown[]): string {
  const limit = page.limit === -1 ? "" : ` LIMIT ${dialect.bind(params, page.limit)}`;
  if (page.offset === 0) return limit;
  // SQLite needs a LIMIT before OFFSET; -1 means no limit there, and PostgreSQL accepts LIMIT ALL.
  const noLimit = dialect === postgresDialect ? " LIMIT ALL" : " LIMIT -1";
  return `${limit || noLimit} OFFSET ${dialect.bind(params, page.offset)}`;
}
