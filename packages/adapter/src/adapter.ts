import type { Adapter as CoreAdapter } from "@agl/core";
import { DiagnosticsCollector, type DiagnosticsReport, emptyReport } from "./diagnostics.js";

/**
 * The minimal adapter contract, defined in `@agl/core` (what the Trainer accepts): `adapt(input)`.
 * Re-exported here so user code needs one import.
 */
export type Adapter<From, To> = CoreAdapter<From, To>;

/**
 * An adapter that can also explain itself: `adaptWithDiagnostics` returns the same output plus a
 * report of what was dropped and why. Every adapter in this package, and every adapter built with
 * `defineAdapter`/`pipe`/`map`/..., is one. Composition helpers accept plain `Adapter`s too.
 */
export interface DiagnosingAdapter<From, To> extends CoreAdapter<From, To> {
  readonly name: string;
  adaptWithDiagnostics(input: From): AdapterResult<To>;
}

export interface AdapterResult<T> {
  output: T;
  diagnostics: DiagnosticsReport;
}

/** What a custom adapter's function receives besides its input. */
export interface AdapterContext {
  /** Record why something was dropped; shows up in `adaptWithDiagnostics(...).diagnostics`. */
  diagnostics: DiagnosticsCollector;
}

/**
 * Build an adapter from a function. The function may record diagnostics through `ctx`.
 *
 * ```ts
 * const onlyRewarded = defineAdapter("onlyRewarded", (triplets: Triplet[], ctx) => {
 *   const kept = triplets.filter((t) => t.reward !== null);
 *   if (kept.length < triplets.length) ctx.diagnostics.add("reward_unmatched", "info", "dropped unrewarded");
 *   return kept;
 * });
 * ```
 */
export function defineAdapter<From, To>(
  name: string,
  fn: (input: From, ctx: AdapterContext) => To,
): DiagnosingAdapter<From, To> {
  return {
    name,
    adapt: (input) => fn(input, { diagnostics: new DiagnosticsCollector() }),
    adaptWithDiagnostics: (input) => {
      const diagnostics = new DiagnosticsCollector();
      const output = fn(input, { diagnostics });
      return { output, diagnostics: diagnostics.report() };
    },
  };
}

/** Run any adapter with diagnostics (a plain `Adapter` reports nothing). */
export function runAdapter<From, To>(adapter: Adapter<From, To>, input: From): AdapterResult<To> {
  const rich = adapter as Partial<DiagnosingAdapter<From, To>>;
  if (typeof rich.adaptWithDiagnostics === "function") return rich.adaptWithDiagnostics(input);
  return { output: adapter.adapt(input), diagnostics: emptyReport() };
}

const nameOf = (adapter: Adapter<any, any>): string =>
  (adapter as Partial<DiagnosingAdapter<any, any>>).name ?? adapter.constructor?.name ?? "adapter";

/** A plain function as an adapter (no diagnostics). */
export function map<From, To>(fn: (input: From) => To, name = fn.name || "map"): DiagnosingAdapter<From, To> {
  return defineAdapter(name, (input) => fn(input));
}

/** Run `adapter` on every element of an array; diagnostics are concatenated. */
export function each<From, To>(adapter: Adapter<From, To>): DiagnosingAdapter<From[], To[]> {
  return defineAdapter(`each(${nameOf(adapter)})`, (inputs, ctx) =>
    inputs.map((input) => {
      const result = runAdapter(adapter, input);
      ctx.diagnostics.merge(result.diagnostics);
      return result.output;
    }),
  );
}

/** Split the input into groups by `key`, adapt each group, and return the results by key (first-seen order). */
export function groupBy<T, To>(
  key: (item: T) => string,
  adapter: Adapter<T[], To>,
): DiagnosingAdapter<T[], Map<string, To>> {
  return defineAdapter(`groupBy(${nameOf(adapter)})`, (items, ctx) => {
    const groups = new Map<string, T[]>();
    for (const item of items) {
      const k = key(item);
      const group = groups.get(k);
      if (group) group.push(item);
      else groups.set(k, [item]);
    }
    const out = new Map<string, To>();
    for (const [k, group] of groups) {
      const result = runAdapter(adapter, group);
      ctx.diagnostics.merge(result.diagnostics);
      out.set(k, result.output);
    }
    return out;
  });
}

/** Keep elements that satisfy `predicate`. */
export function filter<T>(predicate: (item: T) => boolean, name = "filter"): DiagnosingAdapter<T[], T[]> {
  return defineAdapter(name, (items) => items.filter(predicate));
}

/** Chain adapters left to right; the result's diagnostics cover every stage. */
export function pipe<X, Y>(a: Adapter<X, Y>): DiagnosingAdapter<X, Y>;
export function pipe<X, Y, Z>(a: Adapter<X, Y>, b: Adapter<Y, Z>): DiagnosingAdapter<X, Z>;
export function pipe<X, Y, Z, W>(
  a: Adapter<X, Y>,
  b: Adapter<Y, Z>,
  c: Adapter<Z, W>,
): DiagnosingAdapter<X, W>;
export function pipe<X, Y, Z, W, V>(
  a: Adapter<X, Y>,
  b: Adapter<Y, Z>,
  c: Adapter<Z, W>,
  d: Adapter<W, V>,
): DiagnosingAdapter<X, V>;
export function pipe(...adapters: Adapter<any, any>[]): DiagnosingAdapter<any, any>;
export function pipe(...adapters: Adapter<any, any>[]): DiagnosingAdapter<any, any> {
  if (adapters.length === 0) throw new TypeError("pipe() needs at least one adapter");
  return defineAdapter(adapters.map(nameOf).join(" | "), (input, ctx) => {
    let value = input;
    for (const adapter of adapters) {
      const result = runAdapter(adapter, value);
      ctx.diagnostics.merge(result.diagnostics);
      value = result.output;
    }
    return value;
  });
}
