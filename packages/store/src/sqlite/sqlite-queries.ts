/**
 * Read queries of the SQLite store (filters, sorting and paging translated by shared/sql-query), plus
 * the resources and worker-heartbeat writes, which involve no rollout state.
 */
import {
  type Attempt,
  type AttemptedRollout,
  type AttemptQuery,
  type FilterSpec,
  type NamedResources,
  type NormalizedPage,
  newResourcesId,
  normalizeAttemptQuery,
  normalizeResourcesQuery,
  normalizeRolloutQuery,
  normalizeSpanQuery,
  normalizeWorkerQuery,
  type PaginatedResult,
  paginate,
  type ResourcesQuery,
  type ResourcesUpdate,
  type Rollout,
  type RolloutQuery,
  type Span,
  type SpanQuery,
  sortItems,
  type Worker,
  type WorkerQuery,
} from "@agl/core";
import {
  ATTEMPT_COLUMNS,
  RESOURCES_COLUMNS,
  ROLLOUT_COLUMNS,
  SPAN_COLUMNS,
  TERMINAL_STATUSES_SQL,
  WORKER_COLUMNS,
} from "../shared/columns.js";
import { toJson, toJsonRequired } from "../shared/schemas.js";
import { type ColumnMap, limitSql, orderBySql, sqliteDialect, whereSql } from "../shared/sql-query.js";
import {
  type AttemptRow,
  attemptFromRow,
  type ResourcesRow,
  type RolloutRow,
  resourcesFromRow,
  rolloutFromRow,
  spanFromData,
  type WorkerRow,
  workerFromRow,
} from "./rows.js";
import type { SqliteDb } from "./sqlite-db.js";

export class SqliteQueries {
  constructor(private readonly db: SqliteDb) {}

  /**
   * Filter, sort and page `table` rows. When the sort field has no scalar column, every match is
   * loaded and sorted with the core comparator, so the order is exactly the in-memory store's.
   */
  private page<Row, T>(
    table: string,
    columns: ColumnMap,
    filter: FilterSpec<T>,
    page: NormalizedPage,
    insertionKey: string,
    convert: (row: Row) => T,
    extra: { sql: string; params: unknown[] } | null = null,
  ): PaginatedResult<T> {
    const params: unknown[] = extra ? [...extra.params] : [];
    const where = whereSql(filter, columns, sqliteDialect, params, extra ? [extra.sql] : []);
    const total = (
      this.db.prepared<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`).get(...params) as {
        n: number;
      }
    ).n;
    const orderBy = orderBySql(page, columns, sqliteDialect, insertionKey);
    if (orderBy === null) {
      const rows = this.db
        .prepared<Row>(`SELECT * FROM ${table} WHERE ${where} ORDER BY ${insertionKey}`)
        .all(...params);
      const sorted = sortItems(rows.map(convert), page.sortBy, page.sortOrder);
      return paginate(sorted, page.limit, page.offset);
    }
    const pageParams = [...params];
    const limit = limitSql(page, sqliteDialect, pageParams);
    const rows = this.db
      .prepared<Row>(`SELECT * FROM ${table} WHERE ${where} ORDER BY ${orderBy}${limit}`)
      .all(...pageParams);
    return { items: rows.map(convert), limit: page.limit, offset: page.offset, total };
  }

  rollouts(query: RolloutQuery): PaginatedResult<Rollout | AttemptedRollout> {
    const { filter, page } = normalizeRolloutQuery(query);
    const result = this.page<RolloutRow, Rollout & { _count?: number }>(
      "rollouts",
      ROLLOUT_COLUMNS,
      filter,
      page,
      "pk",
      (row) => rolloutFromRow(row),
    );
    const latest = this.latestAttempts(result.items.map((r) => r.rollout_id));
    return {
      ...result,
      items: result.items.map((r) => {
        const attempt = latest.get(r.rollout_id);
        return attempt ? { ...r, attempt } : r;
      }),
    };
  }

  rolloutById(id: string): Rollout | AttemptedRollout | null {
    if (!this.db.stmt.rolloutById.get(id)) return null;
    const loaded = this.db.load(id);
    return loaded.latest ? { ...loaded.rollout, attempt: loaded.latest } : loaded.rollout;
  }

  latestAttempt(id: string): Attempt | null {
    const row = this.db.stmt.rolloutById.get(id);
    return row ? this.db.latestAttempt(row) : null;
  }

  /** The latest attempt of each given rollout that has one. */
  latestAttempts(ids: readonly string[]): Map<string, Attempt> {
    const out = new Map<string, Attempt>();
    if (ids.length === 0) return out;
    const rows = this.db
      .prepared<AttemptRow>(
        `SELECT a.* FROM rollouts r JOIN attempts a ON a.rollout_id = r.rollout_id AND a.sequence_id = r.attempt_count
         WHERE r.rollout_id IN (SELECT value FROM json_each(?))`,
      )
      .all(JSON.stringify(ids));
    for (const row of rows) out.set(row.rollout_id, attemptFromRow(row));
    return out;
  }

  /** The terminal rollouts among `ids`, by id. */
  terminalRollouts(ids: readonly string[]): Map<string, Rollout> {
    const out = new Map<string, Rollout>();
    if (ids.length === 0) return out;
    const rows = this.db
      .prepared<RolloutRow>(
        `SELECT * FROM rollouts WHERE rollout_id IN (SELECT value FROM json_each(?)) AND status IN ${TERMINAL_STATUSES_SQL}`,
      )
      .all(JSON.stringify(ids));
    for (const row of rows) out.set(row.rollout_id, rolloutFromRow(row));
    return out;
  }

  existingRolloutIds(ids: readonly string[]): Set<string> {
    if (ids.length === 0) return new Set();
    const rows = this.db
      .prepared<{ rollout_id: string }>(
        `SELECT rollout_id FROM rollouts WHERE rollout_id IN (SELECT value FROM json_each(?))`,
      )
      .all(JSON.stringify(ids));
    return new Set(rows.map((r) => r.rollout_id));
  }

  attempts(rid: string, query: AttemptQuery): PaginatedResult<Attempt> {
    const { filter, page } = normalizeAttemptQuery(query);
    return this.page<AttemptRow, Attempt>(
      "attempts",
      ATTEMPT_COLUMNS,
      filter,
      page,
      "sequence_id",
      attemptFromRow,
      {
        sql: "rollout_id = ?",
        params: [rid],
      },
    );
  }

  spans(rid: string, query: SpanQuery): PaginatedResult<Span> {
    const { filter, page, attemptId } = normalizeSpanQuery(query);
    let aid = attemptId;
    if (aid === "latest") {
      const row = this.db.stmt.rolloutById.get(rid);
      const latest = row ? this.db.latestAttempt(row) : null;
      if (!latest) return { items: [], limit: page.limit, offset: page.offset, total: 0 };
      aid = latest.attempt_id;
    }
    const must = aid === null ? [] : [{ field: "attempt_id" as const, op: "exact" as const, value: aid }];
    return this.page<{ data: string }, Span>(
      "spans",
      SPAN_COLUMNS,
      { ...filter, must },
      page,
      "pk",
      (row) => spanFromData(row.data),
      {
        sql: "rollout_id = ?",
        params: [rid],
      },
    );
  }

  resources(query: ResourcesQuery): PaginatedResult<ResourcesUpdate> {
    const { filter, page } = normalizeResourcesQuery(query);
    return this.page<ResourcesRow, ResourcesUpdate>(
      "resources",
      RESOURCES_COLUMNS,
      filter,
      page,
      "pk",
      resourcesFromRow,
    );
  }

  resourcesById(id: string): ResourcesUpdate | null {
    const row = this.db.prepared<ResourcesRow>("SELECT * FROM resources WHERE resources_id = ?").get(id) as
      | ResourcesRow
      | undefined;
    return row ? resourcesFromRow(row) : null;
  }

  latestResources(): ResourcesUpdate | null {
    const row = this.db
      .prepared<ResourcesRow>("SELECT * FROM resources ORDER BY touch_seq DESC LIMIT 1")
      .get() as ResourcesRow | undefined;
    return row ? resourcesFromRow(row) : null;
  }

  /** Add (id null) or upsert resources; the result becomes the latest. Run inside a write transaction. */
  putResources(id: string | null, resources: NamedResources, now: number): ResourcesUpdate {
    const existing = id === null ? null : this.resourcesById(id);
    const touch = (
      this.db.prepared<{ t: number }>("SELECT COALESCE(MAX(touch_seq), 0) + 1 AS t FROM resources").get() as {
        t: number;
      }
    ).t;
    const json = toJsonRequired(resources, "resources");
    if (existing) {
      const update = { ...existing, resources, update_time: now, version: existing.version + 1 };
      this.db
        .prepared(
          "UPDATE resources SET resources = ?, update_time = ?, version = ?, touch_seq = ? WHERE resources_id = ?",
        )
        .run(json, now, update.version, touch, update.resources_id);
      return update;
    }
    const update: ResourcesUpdate = {
      resources_id: id ?? newResourcesId(),
      resources,
      create_time: now,
      update_time: now,
      version: 1,
    };
    this.db
      .prepared(
        "INSERT INTO resources (resources_id, resources, create_time, update_time, version, touch_seq) VALUES (?, ?, ?, ?, ?, ?)",
      )
      .run(update.resources_id, json, now, now, 1, touch);
    return update;
  }

  workers(query: WorkerQuery): PaginatedResult<Worker> {
    const { filter, page } = normalizeWorkerQuery(query);
    return this.page<WorkerRow, Worker>(
      "workers",
      WORKER_COLUMNS,
      filter as FilterSpec<Worker>,
      page,
      "pk",
      workerFromRow,
    );
  }

  workerById(id: string): Worker | null {
    const row = this.db.prepared<WorkerRow>("SELECT * FROM workers WHERE worker_id = ?").get(id) as
      | WorkerRow
      | undefined;
    return row ? workerFromRow(row) : null;
  }

  /** Heartbeat: upsert, last_heartbeat_time = now, replace the stats when given. Run inside a write transaction. */
  heartbeatWorker(id: string, stats: Record<string, unknown> | null | undefined, now: number): Worker {
    this.db
      .prepared(
        `INSERT INTO workers (worker_id, status, heartbeat_stats, last_heartbeat_time) VALUES (?, 'unknown', ?, ?)
         ON CONFLICT (worker_id) DO UPDATE SET last_heartbeat_time = excluded.last_heartbeat_time,
           heartbeat_stats = CASE WHEN ? THEN excluded.heartbeat_stats ELSE workers.heartbeat_stats END`,
      )
      .run(
        id,
        stats === undefined ? null : toJson(stats, "heartbeat_stats"),
        now,
        stats === undefined ? 0 : 1,
      );
    return this.workerById(id)!;
  }
}
