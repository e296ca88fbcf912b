/** What both SQL schemas share: the scalar columns keyed by model field (same names in SQLite and PostgreSQL), and the terminal statuses. */
import { TERMINAL_ROLLOUT_STATUSES } from "@agl/core";
import type { ColumnMap } from "./sql-query.js";

/** `IN` list of the terminal rollout statuses, from the state machine (status values are fixed identifiers). */
export const TERMINAL_STATUSES_SQL = `(${[...TERMINAL_ROLLOUT_STATUSES].map((s) => `'${s}'`).join(", ")})`;

/** Scalar columns that queries can filter and sort on in SQL (both SQL stores use the same names). */
export const ROLLOUT_COLUMNS: ColumnMap = {
  rollout_id: "text",
  start_time: "time",
  end_time: "time",
  mode: "text",
  resources_id: "text",
  status: "text",
};
export const ATTEMPT_COLUMNS: ColumnMap = {
  rollout_id: "text",
  attempt_id: "text",
  sequence_id: "number",
  start_time: "time",
  end_time: "time",
  status: "text",
  worker_id: "text",
  last_heartbeat_time: "time",
};
export const SPAN_COLUMNS: ColumnMap = {
  rollout_id: "text",
  attempt_id: "text",
  sequence_id: "number",
  trace_id: "text",
  span_id: "text",
  parent_id: "text",
  name: "text",
  start_time: "time",
  end_time: "time",
};
export const RESOURCES_COLUMNS: ColumnMap = {
  resources_id: "text",
  create_time: "time",
  update_time: "time",
  version: "number",
};
export const WORKER_COLUMNS: ColumnMap = {
  worker_id: "text",
  status: "text",
  last_heartbeat_time: "time",
  last_dequeue_time: "time",
  last_busy_time: "time",
  last_idle_time: "time",
  current_rollout_id: "text",
  current_attempt_id: "text",
};
