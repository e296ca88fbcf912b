import { InvalidArgumentError } from "@agl/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  fieldComparator,
  matchesFilters,
  normalizePageOptions,
  paginate,
  queryItems,
  ROLLOUT_FIELDS,
  sortItems,
  validateLimitOffset,
  validateSortBy,
} from "./query.js";
import { normalizeRolloutQuery, normalizeSpanQuery } from "./query-schemas.js";

type Row = { id: string; n: number | null; end_time: number | null; tag: string | null };
const rows: Row[] = [
  { id: "a1", n: 3, end_time: 5, tag: "x" },
  { id: "b2", n: null, end_time: null, tag: null },
  { id: "c3", n: 1, end_time: 2, tag: "y" },
  { id: "a4", n: 2, end_time: null, tag: "x" },
];

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    return (error as InvalidArgumentError).field;
  }
  throw new Error("expected an InvalidArgumentError");
}

describe("filters", () => {
  it("exact, within and contains combine with and/or plus an always-ANDed must group", () => {
    const ids = (spec: Parameters<typeof matchesFilters<Row>>[1]) =>
      rows.filter((r) => matchesFilters(r, spec)).map((r) => r.id);
    expect(ids({})).toEqual(["a1", "b2", "c3", "a4"]);
    expect(ids({ conditions: [{ field: "tag", op: "exact", value: "x" }] })).toEqual(["a1", "a4"]);
    expect(ids({ conditions: [{ field: "id", op: "contains", value: "a" }] })).toEqual(["a1", "a4"]);
    expect(ids({ conditions: [{ field: "n", op: "within", values: [1, 2] }] })).toEqual(["c3", "a4"]);
    expect(ids({ conditions: [{ field: "n", op: "within", values: [] }] })).toEqual([]);
    const pair = [
      { field: "tag", op: "exact", value: "x" },
      { field: "n", op: "within", values: [1] },
    ] as const;
    expect(ids({ conditions: pair, logic: "and" })).toEqual([]);
    expect(ids({ conditions: pair, logic: "or" })).toEqual(["a1", "c3", "a4"]);
    expect(
      ids({ conditions: pair, logic: "or", must: [{ field: "id", op: "contains", value: "a" }] }),
    ).toEqual(["a1", "a4"]);
    // contains never matches a null/non-string field.
    expect(ids({ conditions: [{ field: "tag", op: "contains", value: "" }] })).toEqual(["a1", "c3", "a4"]);
  });
});

describe("sorting", () => {
  it("puts null times last in both orders and treats other nulls as empty values", () => {
    expect(sortItems(rows, "end_time", "asc").map((r) => r.id)).toEqual(["c3", "a1", "b2", "a4"]);
    expect(sortItems(rows, "end_time", "desc").map((r) => r.id)).toEqual(["a1", "c3", "b2", "a4"]);
    expect(sortItems(rows, "n", "asc").map((r) => r.id)).toEqual(["b2", "c3", "a4", "a1"]);
    expect(sortItems(rows, "tag", "desc").map((r) => r.id)).toEqual(["c3", "a1", "a4", "b2"]);
    expect(sortItems(rows, null).map((r) => r.id)).toEqual(["a1", "b2", "c3", "a4"]);
  });

  it("is a stable total order for numbers with nulls (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.option(fc.integer({ min: -5, max: 5 }))), fc.boolean(), (values, desc) => {
        const items = values.map((v, i) => ({ i, start_time: v }));
        const sorted = sortItems(items, "start_time", desc ? "desc" : "asc");
        const nonNull = sorted.filter((x) => x.start_time !== null);
        // nulls all at the end, in insertion order
        expect(sorted.slice(nonNull.length).every((x) => x.start_time === null)).toBe(true);
        const nulls = sorted.slice(nonNull.length).map((x) => x.i);
        expect(nulls).toEqual([...nulls].sort((a, b) => a - b));
        for (let k = 1; k < nonNull.length; k++) {
          const [p, c] = [nonNull[k - 1]!, nonNull[k]!];
          const d = desc ? p.start_time! - c.start_time! : c.start_time! - p.start_time!;
          expect(d > 0 || (d === 0 && p.i < c.i)).toBe(true);
        }
        const cmp = fieldComparator<(typeof items)[number]>("start_time", "asc");
        for (const a of items) expect(cmp(a, a)).toBe(0);
      }),
      { numRuns: 200 },
    );
  });
});

describe("pagination and validation", () => {
  it("pages after counting matches", () => {
    const all = [1, 2, 3, 4, 5];
    expect(paginate(all, 2, 1)).toEqual({ items: [2, 3], limit: 2, offset: 1, total: 5 });
    expect(paginate(all, -1, 3)).toEqual({ items: [4, 5], limit: -1, offset: 3, total: 5 });
    expect(paginate(all, 3, 9)).toEqual({ items: [], limit: 3, offset: 9, total: 5 });
    const page = queryItems(
      rows,
      { conditions: [{ field: "tag", op: "exact", value: "x" }] },
      {
        sortBy: "n",
        sortOrder: "desc",
        limit: 1,
        offset: 0,
      },
    );
    expect(page).toEqual({ items: [rows[0]], limit: 1, offset: 0, total: 2 });
  });

  it("rejects bad limits, offsets, sort fields and orders, naming the field", () => {
    expect(validateLimitOffset(undefined, undefined)).toEqual({ limit: -1, offset: 0 });
    expect(fieldOf(() => validateLimitOffset(0, 0))).toBe("limit");
    expect(fieldOf(() => validateLimitOffset(-3, 0))).toBe("limit");
    expect(fieldOf(() => validateLimitOffset(1.5, 0))).toBe("limit");
    expect(fieldOf(() => validateLimitOffset(5, -1))).toBe("offset");
    expect(validateSortBy("status", ROLLOUT_FIELDS)).toBe("status");
    expect(fieldOf(() => validateSortBy("statuz", ROLLOUT_FIELDS))).toBe("sort_by");
    expect(fieldOf(() => normalizePageOptions({ sortOrder: "up" }, ROLLOUT_FIELDS))).toBe("sort_order");
    expect(normalizePageOptions(null, ROLLOUT_FIELDS, "start_time")).toEqual({
      sortBy: "start_time",
      sortOrder: "asc",
      limit: -1,
      offset: 0,
    });
  });

  it("normalises store queries into filter specs", () => {
    const q = normalizeRolloutQuery({
      statusIn: ["queuing"],
      rolloutIdContains: "ro-",
      filterLogic: "or",
      limit: 5,
    });
    expect(q.filter).toEqual({
      conditions: [
        { field: "status", op: "within", values: ["queuing"] },
        { field: "rollout_id", op: "contains", value: "ro-" },
      ],
      logic: "or",
    });
    expect(q.page).toEqual({ sortBy: null, sortOrder: "asc", limit: 5, offset: 0 });
    expect(fieldOf(() => normalizeRolloutQuery({ statusIn: ["nope" as any] }))).toBe("statusIn[0]");
    const s = normalizeSpanQuery({ attemptId: "latest", nameContains: "llm" });
    expect(s.attemptId).toBe("latest");
    expect(s.page.sortBy).toBe("sequence_id");
  });
});
