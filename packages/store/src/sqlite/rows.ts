/** Row shapes of the SQLite tables and their conversion to the wire types of @agl/core. */
import type { Attempt, ResourcesUpdate, Rollout, Span, Worker } from "@agl/core";
import {
  attemptFromColumns,
  type DecodeJson,
  resourcesFromColumns,
  rolloutFromColumns,
  workerFromColumns,
} from "../shared/row-mapping.js";

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

const parse = JSON.parse as DecodeJson;

export const rolloutFromRow = (row: RolloutRow): Rollout =>
  rolloutFromColumns(row, row.input === null ? undefined : JSON.parse(row.input), parse);
export const attemptFromRow = (row: AttemptRow): Attempt => attemptFromColumns(row, parse);
export const resourcesFromRow = (row: ResourcesRow): ResourcesUpdate => resourcesFromColumns(row, parse);
export const workerFromRow = (row: WorkerRow): Worker => workerFromColumns(row, parse);

export const spanFromData = (data: string): Span => JSON.parse(data) as Span;
