/** Row shapes of the SQLite tables and their conversion to the wire types of @agl/core. */
import type { Attempt, ResourcesUpdate, Rollout, Span, Worker } from "@agl/core";

export interface RolloutRow {
  pk: number;
  rollout_id: string;
  input: string | null;
  start_time: number;
  end_time: number | null;
  mode: Rollout["mode"];
  resources_id: string | null;
  status: Rollout["status"];
  config: string;
  metadata: string;
  queue_seq: number | null;
  deadline: number | null;
  attempt_count: number;
}

export interface AttemptRow {
  rollout_id: string;
  attempt_id: string;
  sequence_id: number;
  start_time: number;
  end_time: number | null;
  status: Attempt["status"];
  worker_id: string | null;
  last_heartbeat_time: number | null;
  metadata: string;
}

export interface ResourcesRow {
  resources_id: string;
  resources: string;
  create_time: number;
  update_time: number;
  version: number;
}

export interface WorkerRow extends Omit<Worker, "heartbeat_stats"> {
  heartbeat_stats: string | null;
}

export function rolloutFromRow(row: RolloutRow): Rollout {
  return {
    rollout_id: row.rollout_id,
    input: row.input === null ? undefined : JSON.parse(row.input),
    start_time: row.start_time,
    end_time: row.end_time,
    mode: row.mode,
    resources_id: row.resources_id,
    status: row.status,
    config: JSON.parse(row.config),
    metadata: JSON.parse(row.metadata),
  };
}

export function attemptFromRow(row: AttemptRow): Attempt {
  return {
    rollout_id: row.rollout_id,
    attempt_id: row.attempt_id,
    sequence_id: row.sequence_id,
    start_time: row.start_time,
    end_time: row.end_time,
    status: row.status,
    worker_id: row.worker_id,
    last_heartbeat_time: row.last_heartbeat_time,
    metadata: JSON.parse(row.metadata),
  };
}

export function resourcesFromRow(row: ResourcesRow): ResourcesUpdate {
  return {
    resources_id: row.resources_id,
    resources: JSON.parse(row.resources),
    create_time: row.create_time,
    update_time: row.update_time,
    version: row.version,
  };
}

export function workerFromRow(row: WorkerRow): Worker {
  return {
    worker_id: row.worker_id,
    status: row.status,
    heartbeat_stats: row.heartbeat_stats === null ? null : JSON.parse(row.heartbeat_stats),
    last_heartbeat_time: row.last_heartbeat_time,
    last_dequeue_time: row.last_dequeue_time,
    last_busy_time: row.last_busy_time,
    last_idle_time: row.last_idle_time,
    current_rollout_id: row.current_rollout_id,
    current_attempt_id: row.current_attempt_id,
  };
}

export const spanFromData = (data: string): Span => JSON.parse(data) as Span;
