/**
 * The SQLite store's data access: prepared statements, loading rows for a mutation, and persisting a
 * RolloutMutation (rollout state, attempts, queue position, watchdog deadline, worker events). All
 * methods are synchronous and must run inside a transaction opened by the caller.
 */
import {
  type Attempt,
  capSequenceId,
  MAX_SPAN_SEQUENCE_ID,
  NotFoundError,
  type Rollout,
  type Span,
} from "@agl/core";
import type { Database, Statement } from "better-sqlite3";
import { compactWorkerEvents, type RolloutMutation, type WorkerEvent } from "../shared/rollout-mutation.js";
import { toJson, toJsonRequired } from "../shared/schemas.js";
import { type AttemptRow, attemptFromRow, type RolloutRow, rolloutFromRow } from "./rows.js";

export interface LoadedRollout {
  rollout: Rollout;
  row: RolloutRow;
  latest: Attempt | null;
}

/** A rollout row with its latest attempt's columns (all null when it has none). */
interface RolloutWithLatestRow extends RolloutRow {
  a_attempt_id: string | null;
  a_sequence_id: number | null;
  a_start_time: number | null;
  a_end_time: number | null;
  a_status: Attempt["status"] | null;
  a_worker_id: string | null;
  a_last_heartbeat_time: number | null;
  a_metadata: string | null;
}

export class SqliteDb {
  readonly stmt: {
    rolloutById: Statement<[string], RolloutRow>;
    rolloutWithLatest: Statement<[string], RolloutWithLatestRow>;
    latestAttempt: Statement<[string, number], AttemptRow>;
    attemptById: Statement<[string, string], AttemptRow>;
    insertRollout: Statement;
    updateRolloutState: Statement;
    updateRolloutFields: Statement;
    insertAttempt: Statement;
    updateAttempt: Statement;
    upsertWorkerEvent: Statement;
    nextQueueSeq: Statement<[], { next: number }>;
    queueHead: Statement<[number], RolloutRow>;
    popStale: Statement<[string]>;
    latestResourcesId: Statement<[], { resources_id: string }>;
    insertSpan: Statement;
    bumpSequence: Statement<[string, number]>;
    nextSequence: Statement<[string], { value: number }>;
    allocateSequences: Statement<[string, number], { value: number }>;
    dueRollouts: Statement<[number, number], RolloutRow>;
    earliestDeadline: Statement<[], { earliest: number | null }>;
  };
  private readonly cache = new Map<string, Statement>();

  constructor(readonly db: Database) {
    const p = <T extends unknown[] = unknown[], R = unknown>(sql: string) => db.prepare<T, R>(sql);
    this.stmt = {
      rolloutById: p("SELECT * FROM rollouts WHERE rollout_id = ?"),
      // load(): the rollout and its latest attempt in one step (the attempt's columns prefixed a_).
      rolloutWithLatest: p(`SELECT r.*, a.attempt_id AS a_attempt_id, a.sequence_id AS a_sequence_id,
        a.start_time AS a_start_time, a.end_time AS a_end_time, a.status AS a_status, a.worker_id AS a_worker_id,
        a.last_heartbeat_time AS a_last_heartbeat_time, a.metadata AS a_metadata
        FROM rollouts r LEFT JOIN attempts a ON a.rollout_id = r.rollout_id AND a.sequence_id = r.attempt_count
        WHERE r.rollout_id = ?`),
      latestAttempt: p("SELECT * FROM attempts WHERE rollout_id = ? AND sequence_id = ?"),
      attemptById: p("SELECT * FROM attempts WHERE rollout_id = ? AND attempt_id = ?"),
      insertRollout: p(`INSERT INTO rollouts
        (rollout_id, input, start_time, end_time, mode, resources_id, status, config, metadata, queue_seq, deadline, attempt_count)
        VALUES (@rollout_id, @input, @start_time, @end_time, @mode, @resources_id, @status, @config, @metadata, @queue_seq, NULL, 0)`),
      updateRolloutState: p(`UPDATE rollouts SET status = @status, end_time = @end_time, deadline = @deadline,
        attempt_count = @attempt_count,
        queue_seq = CASE WHEN @pop THEN NULL
          WHEN @enqueue AND queue_seq IS NULL
            THEN (SELECT COALESCE(MAX(queue_seq), 0) + 1 FROM rollouts WHERE queue_seq IS NOT NULL)
          ELSE queue_seq END
        WHERE rollout_id = @rollout_id`),
      updateRolloutFields: p(`UPDATE rollouts SET input = @input, mode = @mode, resources_id = @resources_id,
        config = @config, metadata = @metadata WHERE rollout_id = @rollout_id`),
      insertAttempt: p(`INSERT INTO attempts
        (rollout_id, attempt_id, sequence_id, start_time, end_time, status, worker_id, last_heartbeat_time, metadata)
        VALUES (@rollout_id, @attempt_id, @sequence_id, @start_time, @end_time, @status, @worker_id, @last_heartbeat_time, @metadata)`),
      updateAttempt: p(`UPDATE attempts SET end_time = @end_time, status = @status, worker_id = @worker_id,
        last_heartbeat_time = @last_heartbeat_time, metadata = @metadata
        WHERE rollout_id = @rollout_id AND attempt_id = @attempt_id`),
      // The busy/idle timestamps change only on a status change; CASE sees the old row.
      upsertWorkerEvent: p(`INSERT INTO workers
        (worker_id, status, last_dequeue_time, last_busy_time, last_idle_time, current_rollout_id, current_attempt_id)
        VALUES (@worker_id, @status, @dequeue_time,
          CASE WHEN @status = 'busy' THEN @now END, CASE WHEN @status = 'idle' THEN @now END, @rid, @aid)
        ON CONFLICT (worker_id) DO UPDATE SET
          last_busy_time = CASE WHEN excluded.status = 'busy' AND workers.status <> 'busy' THEN @now ELSE workers.last_busy_time END,
          last_idle_time = CASE WHEN excluded.status = 'idle' AND workers.status <> 'idle' THEN @now ELSE workers.last_idle_time END,
          status = excluded.status,
          current_rollout_id = excluded.current_rollout_id,
          current_attempt_id = excluded.current_attempt_id,
          last_dequeue_time = COALESCE(excluded.last_dequeue_time, workers.last_dequeue_time)`),
      nextQueueSeq: p(
        "SELECT COALESCE(MAX(queue_seq), 0) + 1 AS next FROM rollouts WHERE queue_seq IS NOT NULL",
      ),
      queueHead: p("SELECT * FROM rollouts WHERE queue_seq IS NOT NULL ORDER BY queue_seq LIMIT ?"),
      popStale: p("UPDATE rollouts SET queue_seq = NULL WHERE rollout_id = ?"),
      latestResourcesId: p("SELECT resources_id FROM resources ORDER BY touch_seq DESC LIMIT 1"),
      insertSpan: p(`INSERT OR IGNORE INTO spans
        (rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, start_time, end_time, data)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      bumpSequence: p(`INSERT INTO span_sequences (rollout_id, value) VALUES (?, ?)
        ON CONFLICT (rollout_id) DO UPDATE SET value = MAX(value, excluded.value)`),
      // The counter restarts from at most MAX_SPAN_SEQUENCE_ID, so it stays below that plus one
      // call's count, and what is handed out is capped (sequenceIdsFrom).
      nextSequence: p(`INSERT INTO span_sequences (rollout_id, value) VALUES (?, 1)
        ON CONFLICT (rollout_id) DO UPDATE SET value = MIN(value, ${MAX_SPAN_SEQUENCE_ID}) + 1 RETURNING value`),
      allocateSequences: p(`INSERT INTO span_sequences (rollout_id, value) VALUES (?, ?)
        ON CONFLICT (rollout_id) DO UPDATE SET value = MIN(value, ${MAX_SPAN_SEQUENCE_ID}) + excluded.value
        RETURNING value`),
      dueRollouts: p(
        "SELECT * FROM rollouts WHERE deadline IS NOT NULL AND deadline < ? ORDER BY deadline LIMIT ?",
      ),
      earliestDeadline: p("SELECT MIN(deadline) AS earliest FROM rollouts WHERE deadline IS NOT NULL"),
    };
  }

  /** A prepared statement for dynamic (query) SQL, cached by its text. */
  prepared<R = unknown>(sql: string): Statement<unknown[], R> {
    let stmt = this.cache.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      if (this.cache.size > 256) this.cache.clear();
      this.cache.set(sql, stmt);
    }
    return stmt as Statement<unknown[], R>;
  }

  latestAttempt(row: Pick<RolloutRow, "rollout_id" | "attempt_count">): Attempt | null {
    if (row.attempt_count === 0) return null;
    const a = this.stmt.latestAttempt.get(row.rollout_id, row.attempt_count);
    return a ? attemptFromRow(a) : null;
  }

  /** The rollout and its latest attempt, read in one statement (two separate reads cost ~10% more per span request). */
  load(rid: string): LoadedRollout {
    const row = this.stmt.rolloutWithLatest.get(rid);
    if (!row) throw new NotFoundError("rollout", rid, `Rollout ${rid} not found`);
    const latest =
      row.a_attempt_id === null
        ? null
        : attemptFromRow({
            rollout_id: row.rollout_id,
            attempt_id: row.a_attempt_id,
            sequence_id: row.a_sequence_id!,
            start_time: row.a_start_time!,
            end_time: row.a_end_time,
            status: row.a_status!,
            worker_id: row.a_worker_id,
            last_heartbeat_time: row.a_last_heartbeat_time,
            metadata: row.a_metadata!,
          });
    return { row, rollout: rolloutFromRow(row), latest };
  }

  /** The attempt `aid` ("latest" allowed) of a loaded rollout; the latest is the same object as `loaded.latest`. */
  attempt(loaded: LoadedRollout, aid: string): Attempt {
    const rid = loaded.rollout.rollout_id;
    if (aid === "latest" || loaded.latest?.attempt_id === aid) {
      if (loaded.latest) return loaded.latest;
    } else {
      const row = this.stmt.attemptById.get(rid, aid);
      if (row) return attemptFromRow(row);
    }
    throw new NotFoundError("attempt", aid, `Attempt ${aid} not found for rollout ${rid}`);
  }

  latestResourcesId(): string | null {
    return this.stmt.latestResourcesId.get()?.resources_id ?? null;
  }

  insertRollout(rollout: Rollout, queueSeq: number | null): void {
    this.stmt.insertRollout.run({
      rollout_id: rollout.rollout_id,
      input: toJson(rollout.input, "input"),
      start_time: rollout.start_time,
      end_time: rollout.end_time,
      mode: rollout.mode,
      resources_id: rollout.resources_id,
      status: rollout.status,
      config: toJsonRequired(rollout.config, "config"),
      metadata: toJsonRequired(rollout.metadata, "metadata"),
      queue_seq: queueSeq,
    });
  }

  updateRolloutFields(rollout: Rollout): void {
    this.stmt.updateRolloutFields.run({
      rollout_id: rollout.rollout_id,
      input: toJson(rollout.input, "input"),
      mode: rollout.mode,
      resources_id: rollout.resources_id,
      config: toJsonRequired(rollout.config, "config"),
      metadata: toJsonRequired(rollout.metadata, "metadata"),
    });
  }

  /**
   * Write a mutation back. `prev` is the rollout row as loaded (its unchanged state is not rewritten);
   * `pop` removes the rollout from the queue (it was just claimed).
   */
  persist(m: RolloutMutation, prev: Pick<RolloutRow, "deadline" | "queue_seq"> | null, pop = false): void {
    const r = m.rollout;
    const skip = !pop && prev !== null && !m.needsRolloutWrite(prev.deadline, prev.queue_seq !== null);
    if (!skip)
      this.stmt.updateRolloutState.run({
        rollout_id: r.rollout_id,
        status: r.status,
        end_time: r.end_time,
        deadline: m.deadline,
        attempt_count: m.attemptCount,
        pop: pop ? 1 : 0,
        enqueue: m.enqueue ? 1 : 0,
      });
    for (const a of m.created) this.stmt.insertAttempt.run(attemptParams(a));
    for (const a of m.changed.values()) this.stmt.updateAttempt.run(attemptParams(a));
    this.applyWorkerEvents(m.workerEvents, m.now);
  }

  applyWorkerEvents(events: readonly WorkerEvent[], now: number): void {
    for (const e of compactWorkerEvents(events)) {
      this.stmt.upsertWorkerEvent.run({
        worker_id: e.workerId,
        status: e.status,
        dequeue_time: e.dequeued ? now : null,
        now,
        rid: e.current?.rolloutId ?? null,
        aid: e.current?.attemptId ?? null,
      });
    }
  }

  /** Insert a span unless (rid, aid, span_id) exists; true when stored. The caller bumps the counter. */
  insertSpan(span: Span): boolean {
    const info = this.stmt.insertSpan.run(
      span.rollout_id,
      span.attempt_id,
      span.sequence_id,
      span.trace_id,
      span.span_id,
      span.parent_id,
      span.name,
      span.start_time,
      span.end_time,
      toJsonRequired(span, "span"),
    );
    return info.changes > 0;
  }

  /** counter := max(counter, seq) for a rollout. */
  bumpSequence(rid: string, seq: number): void {
    this.stmt.bumpSequence.run(rid, seq);
  }

  nextSequence(rid: string): number {
    return capSequenceId(this.stmt.nextSequence.get(rid)!.value);
  }

  /** Reserve `count` consecutive sequence ids of a rollout; returns the first. */
  allocateSequences(rid: string, count: number): number {
    return this.stmt.allocateSequences.get(rid, count)!.value - count + 1;
  }
}

function attemptParams(a: Attempt): Record<string, unknown> {
  return {
    rollout_id: a.rollout_id,
    attempt_id: a.attempt_id,
    sequence_id: a.sequence_id,
    start_time: a.start_time,
    end_time: a.end_time,
    status: a.status,
    worker_id: a.worker_id,
    last_heartbeat_time: a.last_heartbeat_time,
    metadata: toJsonRequired(a.metadata, "metadata"),
  };
}
