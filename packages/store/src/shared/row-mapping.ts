/**
 * Table rows to the wire types of @agl/core, for both durable stores. The columns are the same; only
 * the JSON columns differ (SQLite returns their text, PostgreSQL the decoded jsonb), so each store
 * passes how to decode one. Picking the fields one by one keeps bookkeeping columns (pk, queue_seq,
 * deadline, ...) off the wire.
 */
import type { Attempt, ResourcesUpdate, Rollout, Worker } from "@agl/core";

/** Decodes a non-null JSON column value as the driver returned it. */
export type DecodeJson = (value: never) => unknown;

/** For drivers that return JSON columns decoded already (pg's jsonb). */
export const alreadyDecoded: DecodeJson = (value) => value;

type WithJson<T, K extends keyof T> = Omit<T, K> & { [P in K]: unknown };

/** A rollout row; `input` is decoded by the caller, since each database marks an absent input its own way. */
export function rolloutFromColumns(
  row: WithJson<Rollout, "input" | "config" | "metadata">,
  input: unknown,
  json: DecodeJson,
): Rollout {
  return {
    rollout_id: row.rollout_id,
    input,
    start_time: row.start_time,
    end_time: row.end_time,
    mode: row.mode,
    resources_id: row.resources_id,
    status: row.status,
    config: json(row.config as never) as Rollout["config"],
    metadata: json(row.metadata as never) as Rollout["metadata"],
  };
}

export function attemptFromColumns(row: WithJson<Attempt, "metadata">, json: DecodeJson): Attempt {
  return {
    rollout_id: row.rollout_id,
    attempt_id: row.attempt_id,
    sequence_id: row.sequence_id,
    start_time: row.start_time,
    end_time: row.end_time,
    status: row.status,
    worker_id: row.worker_id,
    last_heartbeat_time: row.last_heartbeat_time,
    metadata: json(row.metadata as never) as Attempt["metadata"],
  };
}

export function resourcesFromColumns(
  row: WithJson<ResourcesUpdate, "resources">,
  json: DecodeJson,
): ResourcesUpdate {
  return {
    resources_id: row.resources_id,
    resources: json(row.resources as never) as ResourcesUpdate["resources"],
    create_time: row.create_time,
    update_time: row.update_time,
    version: row.version,
  };
}

export function workerFromColumns(row: WithJson<Worker, "heartbeat_stats">, json: DecodeJson): Worker {
  return {
    worker_id: row.worker_id,
    status: row.status,
    heartbeat_stats:
      row.heartbeat_stats === null ? null : (json(row.heartbeat_stats as never) as Worker["heartbeat_stats"]),
    last_heartbeat_time: row.last_heartbeat_time,
    last_dequeue_time: row.last_dequeue_time,
    last_busy_time: row.last_busy_time,
    last_idle_time: row.last_idle_time,
    current_rollout_id: row.current_rollout_id,
    current_attempt_id: row.current_attempt_id,
  };
}
