import { describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../../errors.js";
import { MAX_NESTING_DEPTH } from "../../types/input-rules.js";
import type { StoreFactory } from "../helpers.js";
import { expectError, makeReadableSpan, makeSpan, withStore } from "../helpers.js";
import { nested } from "./input-rules.js";

const R = "\uFFFD";
const NUL = "\u0000";
const HIGH = "\ud800";
const LOW = "\udc00";

/** A span with text no backend can hold in every part of it, and what every store must keep of it. */
function dirtyParts() {
  const context = (extra: Record<string, unknown>) => ({
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    span_id: "00000000000000aa",
    is_remote: false,
    trace_state: { [`vendor${NUL}`]: `v${HIGH}` },
    ...extra,
  });
  const input = {
    name: `llm${NUL}call`,
    status: { status_code: "ERROR" as const, description: `tool said ${LOW}` },
    attributes: {
      "gen_ai.completion": `a${NUL}b${HIGH}c`,
      [`key${NUL}`]: [`x${NUL}`, { [`in${HIGH}`]: `y${LOW}` }],
      clean: "unchanged",
    },
    events: [{ name: `ev${NUL}`, attributes: { [`e${NUL}`]: `f${NUL}` }, timestamp: 1 }],
    links: [{ context: context({}), attributes: { [`l${LOW}`]: `m${NUL}` } }],
    // Issue: a NUL in an unknown key of context/parent/resource once passed the rules and PostgreSQL 500'd.
    context: context({ [`extra${NUL}`]: `z${NUL}` }),
    parent: context({ [`p${NUL}`]: 1 }),
    resource: {
      attributes: { [`service${NUL}name`]: `svc${HIGH}` },
      schema_url: `u${NUL}`,
      [`r${NUL}`]: true,
    },
    [`custom${NUL}`]: { [`deep${NUL}`]: [`w${HIGH}${LOW}ok`] },
  };
  const stored = (c: Record<string, unknown>) => ({
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    span_id: "00000000000000aa",
    is_remote: false,
    trace_state: { [`vendor${R}`]: `v${R}` },
    ...c,
  });
  const expected = {
    name: `llm${R}call`,
    status: { status_code: "ERROR", description: `tool said ${R}` },
    attributes: {
      "gen_ai.completion": `a${R}b${R}c`,
      [`key${R}`]: [`x${R}`, { [`in${R}`]: `y${R}` }],
      clean: "unchanged",
      "agl.sanitized": true,
    },
    events: [{ name: `ev${R}`, attributes: { [`e${R}`]: `f${R}` }, timestamp: 1 }],
    links: [{ context: stored({}), attributes: { [`l${R}`]: `m${R}` } }],
    context: stored({ [`extra${R}`]: `z${R}` }),
    parent: stored({ [`p${R}`]: 1 }),
    resource: { attributes: { [`service${R}name`]: `svc${R}` }, schema_url: `u${R}`, [`r${R}`]: true },
    // A well-formed surrogate pair is ordinary text and stays.
    [`custom${R}`]: { [`deep${R}`]: [`w${HIGH}${LOW}ok`] },
  };
  return { input, expected };
}

/**
 * Text PostgreSQL or strict JSON cannot hold (U+0000, lone surrogates) is stored, not refused, in the
 * same documented encoding on every backend (core's span-sanitize.ts): U+FFFD in its place, colliding
 * keys made unique, the span marked `agl.sanitized = true`. What cannot be rewritten is still refused.
 */
export function sanitizeTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));

  describe("span text sanitising", () => {
    test("NUL and lone surrogates anywhere in a span become U+FFFD; the span is marked", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const { input, expected } = dirtyParts();
      const returned = await store.addSpan(makeSpan(r.attempt, 1, input as never));
      expect(returned).toMatchObject(expected);
      const [batched] = await store.addManySpans([makeSpan(r.attempt, 2, input as never)]);
      expect(batched).toMatchObject(expected);
      const items = (await store.querySpans(r.rollout_id)).items;
      expect(items).toHaveLength(2);
      for (const span of items) expect(span).toMatchObject(expected);
      // Exactly the expected keys: nothing dropped, nothing left unsanitised.
      expect(Object.keys(items[0]!.attributes).sort()).toEqual(Object.keys(expected.attributes).sort());
      // JSON.stringify escapes exactly NUL and lone surrogates (a well-formed pair stays as is).
      expect(JSON.stringify(items)).not.toMatch(/\\u0000|\\ud[89a-f][0-9a-f]{2}/i);
    });

    test("keys that collide once replaced all survive, with U+FFFD appended", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const attributes = { [`k${NUL}`]: 1, [`k${R}`]: 2, [`k${HIGH}`]: 3 };
      await store.addSpan(makeSpan(r.attempt, 1, { attributes }));
      const [span] = (await store.querySpans(r.rollout_id)).items;
      expect(span!.attributes).toEqual({
        [`k${R}`]: 2,
        [`k${R}${R}`]: 1,
        [`k${R}${R}${R}`]: 3,
        "agl.sanitized": true,
      });
    });

    test("a clean span is stored unchanged and unmarked; OTel spans are sanitised too", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const clean = await store.addSpan(makeSpan(r.attempt, 1, { attributes: { text: `ok ${HIGH}${LOW}` } }));
      expect(clean!.attributes).toEqual({ text: `ok ${HIGH}${LOW}` });
      const otel = await store.addOtelSpan(
        r.rollout_id,
        r.attempt.attempt_id,
        makeReadableSpan(`otel${NUL}`, { [`a${NUL}`]: `b${HIGH}` }),
      );
      expect(otel).toMatchObject({
        name: `otel${R}`,
        attributes: { [`a${R}`]: `b${R}`, "agl.sanitized": true },
      });
      const names = (await store.querySpans(r.rollout_id)).items.map((s) => [
        s.name,
        s.attributes["agl.sanitized"],
      ]);
      expect(names).toEqual([
        ["test.span", undefined],
        [`otel${R}`, true],
      ]);
    });

    test("what cannot be rewritten is still refused: bad ids, deep nesting; the store stays usable", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const refused = async (p: Promise<unknown>) =>
        (await expectError<InvalidArgumentError>(p, InvalidArgumentError)).field;
      expect(
        await refused(store.addSpan({ ...makeSpan(r.attempt, 1), rollout_id: `${r.rollout_id}${NUL}` })),
      ).toContain("rollout_id");
      expect(
        await refused(store.addManySpans([{ ...makeSpan(r.attempt, 1), attempt_id: `a${HIGH}` }])),
      ).toContain("attempt_id");
      expect(
        await refused(
          store.addSpan(
            makeSpan(r.attempt, 1, { attributes: { [`d${NUL}`]: nested(MAX_NESTING_DEPTH + 1) } as never }),
          ),
        ),
      ).toContain("attributes");
      expect((await store.querySpans(r.rollout_id)).items).toHaveLength(0);
      await store.addSpan(makeSpan(r.attempt, 1, { name: `fine${NUL}` }));
      expect((await store.querySpans(r.rollout_id)).items.map((s) => s.name)).toEqual([`fine${R}`]);
    });
  });
}
