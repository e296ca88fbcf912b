/** Read queries of the PostgreSQL store, plus the resources and worker-heartbeat writes. */
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
import { alreadyDecoded, resourcesFromColumns, workerFromColumns } from "../shared/row-mapping.js";
import { toJson, toJsonRequired } from "../shared/schemas.js";
import { type ColumnMap, limitSql, orderBySql, postgresDialect, whereSql } from "../shared/sql-query.js";
import {
  attemptFromPg,
  type PgRolloutRow,
  type Queryable,
  ROLLOUT_COLS,
  ROLLOUT_WITH_LATEST,
  rolloutFromPg,
} from "./pg-db.js";

const resourcesFromPg = (row: ResourcesUpdate): ResourcesUpdate => resourcesFromColumns(row, alreadyDecoded);
const workerFromPg = (row: Worker): Worker => workerFromColumns(row, alreadyDecoded);

/**
 * Filter, sort and page. When the sort field has no scalar column, every match is loaded and sorted
 * with the core comparator, so the order is exactly the in-memory store's.
 */
async function page<Row, T>(
  db: Queryable,
  from: string,
  select: string,
  columns: ColumnMap,
  filter: FilterSpec<T>,
  pageOpts: NormalizedPage,
  insertionKey: string,
  convert: (row: Row) => T,
  extra: { sql: string; params: unknown[] } | null = null,
): Promise<PaginatedResult<T>> {
  const params: unknown[] = extra ? [...extra.params] : [];
  const where = whereSql(filter, columns, postgresDialect, params, extra ? [extra.sql] : []);
  const orderBy = orderBySql(pageOpts, columns, postgresDialect, insertionKey);
  if (orderBy === null) {
    const { rows } = await db.query(
      `SELECT ${select} FROM ${from} WHERE ${where} ORDER BY ${insertionKey}`,
      params,
    );
    const sorted = sortItems((rows as Row[]).map(convert), pageOpts.sortBy, pageOpts.sortOrder);
    return paginate(sorted, pageOpts.limit, pageOpts.offset);
  }
  const pageParams = [...params];
  const limit = limitSql(pageOpts, postgresDialect, pageParams);
  // The total rides along as a window count, so one round trip serves both.
  const { rows } = await db.query(
    `SELECT ${select}, COUNT(*) OVER () AS agl_total FROM ${from} WHERE ${where} ORDER BY ${orderBy}${limit}`,
    pageParams,
  );
  let total: number;
  if (rows.length > 0) total = Number((rows[0] as { agl_total: string }).agl_total);
  else if (pageOpts.offset === 0) total = 0;
  else total = Number((await db.query(`SELECT COUNT(*) AS n FROM ${from} WHERE ${where}`, params)).rows[0].n);
  return { items: (rows as Row[]).map(convert), limit: pageOpts.limit, offset: pageOpts.offset, total };
}

export class PgQueries {
  constructor(private readonly db: Queryable) {}

  async rollouts(query: RolloutQuery): Promise<PaginatedResult<Rollout | AttemptedRollout>> {
    const { filter, page: p } = normalizeRolloutQuery(query);
    const result = await page<PgRolloutRow, Rollout>(
      this.db,
      "rollouts r",
      ROLLOUT_COLS,
      ROLLOUT_COLUMNS,
      filter,
      p,
      "pk",
      rolloutFromPg,
    );
    const latest = await this.latestAttempts(result.items.map((r) => r.rollout_id));
    return {
      ...result,
      items: result.items.map((r) => {
        const attempt = latest.get(r.rollout_id);
        return attempt ? { ...r, attempt } : r;
      }),
    };
  }

  async latestAttempts(ids: readonly string[]): Promise<Map<string, Attempt>> {
    const out = new Map<string, Attempt>();
    if (ids.length === 0) return out;
    const { rows } = await this.db.query<Attempt>({
      name: "agl_q_latest_attempts",
      text: `SELECT a.* FROM rollouts r JOIN attempts a ON a.rollout_id = r.rollout_id AND a.sequence_id = r.attempt_count
       WHERE r.rollout_id = ANY($1::text[])`,
      values: [ids],
    });
    for (const row of rows) out.set(row.rollout_id, attemptFromPg(row));
    return out;
  }

  async rolloutById(id: string): Promise<Rollout | AttemptedRollout | null> {
    const { rows } = await this.db.query<PgRolloutRow>({
      name: "agl_q_rollout_by_id",
      text: `${ROLLOUT_WITH_LATEST} WHERE r.rollout_id = $1`,
      values: [id],
    });
    const row = rows[0];
    if (!row) return null;
    const rollout = rolloutFromPg(row);
    return row.latest ? { ...rollout, attempt: attemptFromPg(row.latest) } : rollout;
  }

  async latestAttempt(id: string): Promise<Attempt | null> {
    const { rows } = await this.db.query<Attempt>({
      name: "agl_q_latest_attempt",
      text: `SELECT a.* FROM rollouts r JOIN attempts a ON a.rollout_id = r.rollout_id AND a.sequence_id = r.attempt_count
       WHERE r.rollout_id = $1`,
      values: [id],
    });
    return rows[0] ? attemptFromPg(rows[0]) : null;
  }

  /** The terminal rollouts among `ids`, by id. */
  async terminalRollouts(ids: readonly string[]): Promise<Map<string, Rollout>> {
    const out = new Map<string, Rollout>();
    if (ids.length === 0) return out;
    const { rows } = await this.db.query<PgRolloutRow>({
      name: "agl_q_terminal_rollouts",
      text: `SELECT ${ROLLOUT_COLS} FROM rollouts r WHERE r.rollout_id = ANY($1::text[]) AND r.status IN ${TERMINAL_STATUSES_SQL}`,
      values: [ids],
    });
    for (const row of rows) out.set(row.rollout_id, rolloutFromPg(row));
    return out;
  }

  async existingRolloutIds(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const { rows } = await this.db.query<{ rollout_id: string }>({
      name: "agl_q_existing_rollouts",
      text: "SELECT rollout_id FROM rollouts WHERE rollout_id = ANY($1::text[])",
      values: [ids],
    });
    return new Set(rows.map((r) => r.rollout_id));
  }

  attempts(rid: string, query: AttemptQuery): Promise<PaginatedResult<Attempt>> {
    const { filter, page: p } = normalizeAttemptQuery(query);
    return page<Attempt, Attempt>(
      this.db,
      "attempts",
      "*",
      ATTEMPT_COLUMNS,
      filter,
      p,
      "sequence_id",
      attemptFromPg,
      {
        sql: "rollout_id = $1",
        params: [rid],
      },
    );
  }

  async spans(rid: string, query: SpanQuery): Promise<PaginatedResult<Span>> {
    const { filter, page: p, attemptId } = normalizeSpanQuery(query);
    let aid = attemptId;
    if (aid === "latest") {
      const latest = await this.latestAttempt(rid);
      if (!latest) return { items: [], limit: p.limit, offset: p.offset, total: 0 };
      aid = latest.attempt_id;
    }
    const must = aid === null ? [] : [{ field: "attempt_id" as const, op: "exact" as const, value: aid }];
    return page<{ data: Span }, Span>(
      this.db,
      "spans",
      "data",
      SPAN_COLUMNS,
      { ...filter, must },
      p,
      "pk",
      (row) => row.data,
      {
        sql: "rollout_id = $1",
        params: [rid],
      },
    );
  }

  resources(query: ResourcesQuery): Promise<PaginatedResult<ResourcesUpdate>> {
    const { filter, page: p } = normalizeResourcesQuery(query);
    return page<ResourcesUpdate, ResourcesUpdate>(
      this.db,
      "resources",
      "*",
      RESOURCES_COLUMNS,
      filter,
      p,
      "pk",
      resourcesFromPg,
    );
  }

  async resourcesById(id: string): Promise<ResourcesUpdate | null> {
    const { rows } = await this.db.query<ResourcesUpdate>({
      name: "agl_q_resources_by_id",
      text: "SELECT * FROM resources WHERE resources_id = $1",
      values: [id],
    });
    return rows[0] ? resourcesFromPg(rows[0]) : null;
  }

  async latestResources(): Promise<ResourcesUpdate | null> {
    const { rows } = await this.db.query<ResourcesUpdate>({
      name: "agl_q_latest_resources",
      text: "SELECT * FROM resources ORDER BY touch_seq DESC LIMIT 1",
    });
    return rows[0] ? resourcesFromPg(rows[0]) : null;
  }

  /** Add (id null) or upsert resources atomically; the result becomes the latest. */
  async putResources(id: string | null, resources: NamedResources, now: number): Promise<ResourcesUpdate> {
    const { rows } = await this.db.query<ResourcesUpdate>({
      name: "agl_q_put_resources",
      text: `INSERT INTO resources (resources_id, resources, create_time, update_time, version, touch_seq)
       VALUES ($1, $2::jsonb, $3, $3, 1, nextval('resources_touch_seq'))
       ON CONFLICT (resources_id) DO UPDATE SET resources = EXCLUDED.resources, update_time = EXCLUDED.update_time,
         version = resources.version + 1, touch_seq = EXCLUDED.touch_seq
       RETURNING *`,
      values: [id ?? newResourcesId(), toJsonRequired(resources, "resources"), now],
    });
    return resourcesFromPg(rows[0]!);
  }

  /** The row counts of statistics(), in one round trip. */
  async counts(): Promise<{
    total_rollouts: number;
    total_attempts: number;
    total_spans: number;
    total_resources: number;
    total_workers: number;
    queue_length: number;
    watchdog_deadlines: number;
  }> {
    const { rows } = await this.db.query(`SELECT
      (SELECT COUNT(*) FROM rollouts) AS rollouts, (SELECT COUNT(*) FROM attempts) AS attempts,
      (SELECT COUNT(*) FROM spans) AS spans, (SELECT COUNT(*) FROM resources) AS resources,
      (SELECT COUNT(*) FROM workers) AS workers,
      (SELECT COUNT(*) FROM rollouts WHERE queue_seq IS NOT NULL) AS queued,
      (SELECT COUNT(*) FROM rollouts WHERE deadline IS NOT NULL) AS deadlines`);
    const n = rows[0] as Record<string, string>;
    return {
      total_rollouts: Number(n.rollouts),
      total_attempts: Number(n.attempts),
      total_spans: Number(n.spans),
      total_resources: Number(n.resources),
      total_workers: Number(n.workers),
      queue_length: Number(n.queued),
      watchdog_deadlines: Number(n.deadlines),
    };
  }

  workers(query: WorkerQuery): Promise<PaginatedResult<Worker>> {
    const { filter, page: p } = normalizeWorkerQuery(query);
    return page<Worker, Worker>(
      this.db,
      "workers",
      "*",
      WORKER_COLUMNS,
      filter as FilterSpec<Worker>,
      p,
      "pk",
      workerFromPg,
    );
  }

  async workerById(id: string): Promise<Worker | null> {
    const { rows } = await this.db.query<Worker>({
      name: "agl_q_worker_by_id",
      text: "SELECT * FROM workers WHERE worker_id = $1",
      values: [id],
    });
    return rows[0] ? workerFromPg(rows[0]) : null;
  }

  /** Heartbeat: upsert, last_heartbeat_time = now, replace the stats when given. */
  async heartbeatWorker(
    id: string,
    stats: Record<string, unknown> | null | undefined,
    now: number,
  ): Promise<Worker> {
    const { rows } = await this.db.query<Worker>({
      name: "agl_q_heartbeat_worker",
      text: `INSERT INTO workers (worker_id, status, heartbeat_stats, last_heartbeat_time) VALUES ($1, 'unknown', $2::jsonb, $3)
       ON CONFLICT (worker_id) DO UPDATE SET last_heartbeat_time = EXCLUDED.last_heartbeat_time,
         heartbeat_stats = CASE WHEN $4 THEN EXCLUDED.heartbeat_stats ELSE workers.heartbeat_stats END
       RETURNING *`,
      values: [id, stats === undefined ? null : toJson(stats, "heartbeat_stats"), now, stats !== undefined],
    });
    return workerFromPg(rows[0]!);
  }
}
