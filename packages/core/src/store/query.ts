/**
 * In-memory filtering, sorting and pagination with the store query semantics (Agent Lightning v0.3 §2),
 * plus the page-option validation every store shares so that bad queries fail the same way everywhere.
 *
 * Semantics (SQL stores must reproduce them):
 * - a filter condition is `exact` (===), `within` (value in list; an empty list matches nothing) or
 *   `contains` (substring, case-sensitive); conditions combine with `and`/`or`; the `must` group is
 *   always ANDed; no conditions = everything;
 * - sorting is stable (ties keep insertion order); for `*_time` fields nulls sort last in both orders,
 *   for other fields a null compares as "" (against strings) or 0 (against numbers);
 * - `limit` -1 = all, 0 or < -1 is an error; `offset` >= 0; `total` counts matches before paging.
 */
import { z } from "zod";
import { InvalidArgumentError } from "../errors.js";
import type { PaginatedResult } from "../types/misc.js";
import { WorkerSchema } from "../types/misc.js";
import { ResourcesUpdateSchema } from "../types/resources.js";
import { AttemptSchema, RolloutSchema } from "../types/rollout.js";
import { SpanSchema } from "../types/span.js";
import { parseOrThrow } from "../types/validate.js";
import type { FilterLogic, PageOptions, SortOrder } from "./store.js";

/**
 * One condition on one field. Exactly one of exact/within/contains is meaningful. With `key`, the
 * condition tests the string stored under that key of the field's JSON object (e.g. a rollout's
 * `metadata.data_id`); a missing or non-string value matches nothing.
 */
export type FieldCondition<T> = { field: keyof T & string; key?: string } & (
  | { op: "exact"; value: unknown }
  | { op: "within"; values: readonly unknown[] }
  | { op: "contains"; value: string }
);

export interface FilterSpec<T> {
  /** Combined with `logic`. */
  conditions?: ReadonlyArray<FieldCondition<T>>;
  logic?: FilterLogic;
  /** Always ANDed with the result of `conditions`. */
  must?: ReadonlyArray<FieldCondition<T>>;
}

/** Page options as they may arrive (nulls from JSON, unchecked sort order). */
export interface RawPageOptions {
  sortBy?: string | null;
  sortOrder?: string | null;
  limit?: number | null;
  offset?: number | null;
}

/** Normalised, validated page options. `sortBy` null = insertion order. */
export interface NormalizedPage {
  sortBy: string | null;
  sortOrder: SortOrder;
  limit: number;
  offset: number;
}

export const ROLLOUT_FIELDS: readonly string[] = Object.keys(RolloutSchema.shape);
export const ATTEMPT_FIELDS: readonly string[] = Object.keys(AttemptSchema.shape);
export const SPAN_FIELDS: readonly string[] = Object.keys(SpanSchema.shape);
export const RESOURCES_FIELDS: readonly string[] = Object.keys(ResourcesUpdateSchema.shape);
export const WORKER_FIELDS: readonly string[] = Object.keys(WorkerSchema.shape);

export const FilterLogicSchema = z.enum(["and", "or"]);
export const SortOrderSchema = z.enum(["asc", "desc"]);

/** The page part of every query object (camelCase, as the LightningStore interface takes it). */
export const PageOptionsSchema = z.object({
  sortBy: z.string().min(1).nullish(),
  // Checked by validateSortOrder so the error names "sort_order".
  sortOrder: z.string().nullish(),
  limit: z.number().int().nullish(),
  offset: z.number().int().nullish(),
});

/** Check limit/offset: limit -1 = all, 0 or < -1 rejected; offset >= 0. Throws InvalidArgumentError naming the field. */
export function validateLimitOffset(
  limit: number | null | undefined,
  offset: number | null | undefined,
): {
  limit: number;
  offset: number;
} {
  const l = limit ?? -1;
  const o = offset ?? 0;
  if (!Number.isInteger(l)) throw new InvalidArgumentError("limit", "must be an integer");
  if (!Number.isInteger(o)) throw new InvalidArgumentError("offset", "must be an integer");
  if (l === 0 || l < -1)
    throw new InvalidArgumentError("limit", `must be -1 (all) or a positive integer, got ${l}`);
  if (o < 0) throw new InvalidArgumentError("offset", `must be >= 0, got ${o}`);
  return { limit: l, offset: o };
}

/** Check that `sortBy` names a field of the model. Throws InvalidArgumentError("sort_by") otherwise. */
export function validateSortBy(sortBy: string | null | undefined, fields: readonly string[]): string | null {
  if (sortBy == null) return null;
  if (!fields.includes(sortBy)) {
    throw new InvalidArgumentError(
      "sort_by",
      `unknown field "${sortBy}"; expected one of ${fields.join(", ")}`,
    );
  }
  return sortBy;
}

export function validateSortOrder(sortOrder: string | null | undefined): SortOrder {
  if (sortOrder == null) return "asc";
  if (sortOrder !== "asc" && sortOrder !== "desc") {
    throw new InvalidArgumentError("sort_order", `must be "asc" or "desc", got ${JSON.stringify(sortOrder)}`);
  }
  return sortOrder;
}

/** Validate and normalise page options against a model's field list. */
export function normalizePageOptions(
  options: PageOptions | RawPageOptions | null | undefined,
  fields: readonly string[],
  defaultSortBy: string | null = null,
): NormalizedPage {
  const parsed = parseOrThrow(PageOptionsSchema, options ?? {}, "");
  const { limit, offset } = validateLimitOffset(parsed.limit, parsed.offset);
  return {
    sortBy: validateSortBy(parsed.sortBy ?? defaultSortBy, fields),
    sortOrder: validateSortOrder(parsed.sortOrder),
    limit,
    offset,
  };
}

/** Whether a field holds a time, so that nulls sort last. */
export const isTimeField = (field: string): boolean => field.endsWith("_time");

/** The string under `key` of a JSON object value, or null (the SQL stores read it the same way). */
export function stringAtKey(value: unknown, key: string): string | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const v = (value as Record<string, unknown>)[key];
  return typeof v === "string" ? v : null;
}

function matchesCondition<T>(item: T, cond: FieldCondition<T>): boolean {
  const raw = (item as Record<string, unknown>)[cond.field];
  const v = cond.key === undefined ? raw : stringAtKey(raw, cond.key);
  if (cond.key !== undefined && v === null) return false;
  switch (cond.op) {
    case "exact":
      return v === cond.value;
    case "within":
      return cond.values.includes(v);
    case "contains":
      return typeof v === "string" && v.includes(cond.value);
  }
}

/** Whether `item` passes the filter spec. */
export function matchesFilters<T>(item: T, spec: FilterSpec<T>): boolean {
  for (const cond of spec.must ?? []) if (!matchesCondition(item, cond)) return false;
  const conditions = spec.conditions ?? [];
  if (conditions.length === 0) return true;
  return (spec.logic ?? "and") === "or"
    ? conditions.some((c) => matchesCondition(item, c))
    : conditions.every((c) => matchesCondition(item, c));
}

function compareValues(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "string" && typeof b === "string") return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  const sa = typeof a === "string" ? a : JSON.stringify(a ?? "");
  const sb = typeof b === "string" ? b : JSON.stringify(b ?? "");
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

/** A comparator for `field` with the store's null rules. */
export function fieldComparator<T>(field: string, order: SortOrder): (a: T, b: T) => number {
  const sign = order === "desc" ? -1 : 1;
  const timeField = isTimeField(field);
  return (x, y) => {
    let a = (x as Record<string, unknown>)[field] ?? null;
    let b = (y as Record<string, unknown>)[field] ?? null;
    if (a === null && b === null) return 0;
    if (timeField) {
      if (a === null) return 1;
      if (b === null) return -1;
    } else {
      // A null stands for the empty value of whatever type the other side has.
      if (a === null) a = typeof b === "number" ? 0 : "";
      if (b === null) b = typeof a === "number" ? 0 : "";
    }
    return sign * compareValues(a, b);
  };
}

/** A stably sorted copy of `items` (insertion order when sortBy is null). */
export function sortItems<T>(items: readonly T[], sortBy: string | null, sortOrder: SortOrder = "asc"): T[] {
  const copy = items.slice();
  if (sortBy != null) copy.sort(fieldComparator<T>(sortBy, sortOrder));
  return copy;
}

/** Slice an already filtered and sorted list. */
export function paginate<T>(items: readonly T[], limit: number, offset: number): PaginatedResult<T> {
  const end = limit === -1 ? undefined : offset + limit;
  return { items: items.slice(offset, end), limit, offset, total: items.length };
}

/** Filter, sort and paginate in one go. `page` must already be normalised. */
export function queryItems<T>(
  items: Iterable<T>,
  filter: FilterSpec<T>,
  page: NormalizedPage,
): PaginatedResult<T> {
  const matched: T[] = [];
  for (const item of items) if (matchesFilters(item, filter)) matched.push(item);
  return paginate(sortItems(matched, page.sortBy, page.sortOrder), page.limit, page.offset);
}

/** Build the conditions list from optional filter values, skipping the ones not given. */
export function conditions<T>(
  ...specs: Array<FieldCondition<T> | null | undefined | false>
): Array<FieldCondition<T>> {
  return specs.filter((c): c is FieldCondition<T> => !!c);
}

/** Helpers that return a condition only when the value is given (not null/undefined). */
export const exact = <T>(field: keyof T & string, value: unknown): FieldCondition<T> | null =>
  value == null ? null : { field, op: "exact", value };
export const within = <T>(field: keyof T & string, values: readonly unknown[] | null | undefined) =>
  values == null ? null : ({ field, op: "within", values } as FieldCondition<T>);
/** Conditions on the string under `key` of a JSON object field (see {@link FieldCondition}). */
export const withinKey = <T>(
  field: keyof T & string,
  key: string,
  values: readonly string[] | null | undefined,
) => (values == null ? null : ({ field, key, op: "within", values } as FieldCondition<T>));
export const containsKey = <T>(field: keyof T & string, key: string, value: string | null | undefined) =>
  value == null ? null : ({ field, key, op: "contains", value } as FieldCondition<T>);
export const contains = <T>(field: keyof T & string, value: string | null | undefined) =>
  value == null ? null : ({ field, op: "contains", value } as FieldCondition<T>);
