/**
 * A seeded, replayable HTTP fuzzer (fast-check): every request is a route of the server with ids,
 * query and body drawn from hostile arbitraries (NUL, lone surrogates, `.`/`..`, huge and fractional
 * numbers, deep nesting, wrong types, mutated valid bodies, raw garbage). The property: the answer
 * comes within the timeout and is not an undocumented 5xx.
 */
import fc from "fast-check";

export interface Route {
  method: "GET" | "POST" | "DELETE";
  /** `:name` segments take an id. */
  path: string;
  /** A valid body to mutate (POST). */
  body?: unknown;
  /** Query keys the route reads. */
  query?: string[];
  contentType?: string;
}

export interface FuzzOptions {
  baseUrl: string;
  routes: Route[];
  /** Ids that exist, so some requests reach past "not found". */
  ids: () => string[];
  headers?: Record<string, string>;
  /** 5xx statuses the server documents (e.g. 501 for unsupported OTLP signals, 502/504 upstream). */
  allowed5xx: (route: Route, status: number, body: string) => boolean;
  numRuns: number;
  seed: number;
  path?: string;
  timeoutMs?: number;
}

export interface FuzzResult {
  requests: number;
  byStatus: Record<string, number>;
  undocumented5xx: number;
  hangs: number;
}

const utf16 = fc.string({
  unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  maxLength: 40,
});
const nastyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  utf16,
  fc.constantFrom(
    ".",
    "..",
    "",
    "a\u0000b",
    "\ud800",
    "x\udfff",
    "%2e%2e",
    "../..",
    "a/b",
    " ",
    "latest",
    "x".repeat(600),
  ),
);
const nastyNumber = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -1, 1.5, 2 ** 31 - 1, 2 ** 31, 2 ** 53 - 1, 2 ** 53 + 2, 1e308, -1e308, 2 ** 30),
);

function deep(depth: number, leaf: unknown): unknown {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { k: v };
  return v;
}

const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  nastyString,
  nastyNumber,
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 3 }),
  fc.integer({ min: 50, max: 3000 }).map((d) => deep(d, "leaf")),
  fc.dictionary(nastyString, nastyString, { maxKeys: 4 }),
  fc.array(nastyNumber, { maxLength: 5 }),
);

/** Replace the value at one path of `body` (or add a key) with a hostile value. */
function mutate(body: unknown, pick: number, value: unknown, key: string): unknown {
  if (typeof body !== "object" || body === null) return value;
  const copy: any = structuredClone(body);
  const paths: Array<Array<string | number>> = [];
  const walk = (v: unknown, p: Array<string | number>) => {
    paths.push(p);
    if (typeof v === "object" && v !== null && p.length < 4)
      for (const [k, x] of Object.entries(v)) walk(x, [...p, Array.isArray(v) ? Number(k) : k]);
  };
  walk(copy, []);
  const path = paths[pick % paths.length]!;
  if (path.length === 0) {
    copy[key] = value;
    return copy;
  }
  let target = copy;
  for (const p of path.slice(0, -1)) target = target[p];
  target[path[path.length - 1]!] = value;
  return copy;
}

function encodeSegment(id: string): string {
  try {
    return encodeURIComponent(id);
  } catch {
    // Lone surrogates: send their (invalid) UTF-8-style bytes raw, as a hostile client could.
    return [...id].map((ch) => `%${(ch.charCodeAt(0) & 0xff).toString(16).padStart(2, "0")}`).join("");
  }
}

interface Req {
  route: Route;
  path: string;
  body: string | undefined;
  contentType: string;
}

function requestArbitrary(o: FuzzOptions): fc.Arbitrary<Req> {
  return fc
    .record({
      route: fc.constantFrom(...o.routes),
      idPick: fc.array(fc.oneof(fc.nat(), nastyString), { minLength: 3, maxLength: 3 }),
      query: fc.array(
        fc.tuple(
          fc.oneof(
            fc.constantFrom(
              "limit",
              "offset",
              "sort_by",
              "sort_order",
              "status_in",
              "rollout_id",
              "attempt_id",
              "name_contains",
              "filter_logic",
              "rollout_id_in",
            ),
            nastyString,
          ),
          fc.oneof(nastyString, nastyNumber.map(String)),
        ),
        { maxLength: 3 },
      ),
      bodyKind: fc.constantFrom(
        "valid",
        "mutated",
        "mutated",
        "mutated",
        "value",
        "garbage",
        "none",
        "deep-raw",
        "nul-key",
      ),
      deepLevels: fc.integer({ min: 40_000, max: 1_000_000 }),
      pick: fc.nat(),
      value: nastyValue,
      key: nastyString,
      garbage: fc.oneof(
        fc.string({ maxLength: 60 }),
        fc.constantFrom("{", "[1,", "null", '{"a":1}x', "\u0000"),
      ),
    })
    .map(({ route, idPick, query, bodyKind, pick, value, key, garbage, deepLevels }) => {
      const known = o.ids();
      let i = 0;
      let path = route.path.replace(/:[a-z]+/g, () => {
        const p = idPick[i++ % idPick.length]!;
        return encodeSegment(
          typeof p === "number" && known.length > 0 ? known[p % known.length]! : String(p),
        );
      });
      if (query.length > 0 && route.method === "GET") {
        const qs = query.map(([k, v]) => `${encodeSegment(k)}=${encodeSegment(v)}`).join("&");
        path += `?${qs}`;
      }
      let body: string | undefined;
      if (route.method !== "GET") {
        const base = route.body ?? {};
        if (bodyKind === "valid") body = JSON.stringify(base);
        else if (bodyKind === "mutated") body = safeJson(mutate(base, pick, value, key));
        else if (bodyKind === "value") body = safeJson(value);
        else if (bodyKind === "garbage") body = garbage;
        // 80 KB to 2 MB of nested arrays: over the size where servers scan the depth before parsing.
        else if (bodyKind === "deep-raw") body = "[".repeat(deepLevels) + "]".repeat(deepLevels);
        // A NUL inside an object key, at some path of a valid body (context, resource, input...).
        else if (bodyKind === "nul-key")
          body = safeJson(mutate(base, pick, { "k\u0000ey": value }, `a\u0000${key}`));
      }
      return { route, path, body, contentType: route.contentType ?? "application/json" };
    });
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v) ?? "null";
  } catch {
    return "[]";
  }
}

export async function fuzzHttp(o: FuzzOptions): Promise<FuzzResult> {
  const result: FuzzResult = { requests: 0, byStatus: {}, undocumented5xx: 0, hangs: 0 };
  const timeoutMs = o.timeoutMs ?? 15_000;
  await fc.assert(
    fc.asyncProperty(requestArbitrary(o), async (r) => {
      result.requests++;
      let status: number;
      let text: string;
      try {
        const res = await fetch(`${o.baseUrl}${r.path}`, {
          method: r.route.method,
          headers: {
            ...(o.headers ?? {}),
            ...(r.body === undefined ? {} : { "content-type": r.contentType }),
          },
          body: r.body,
          signal: AbortSignal.timeout(timeoutMs),
        });
        status = res.status;
        text = await res.text();
      } catch (error) {
        const name = (error as Error).name;
        if (name === "TimeoutError") {
          result.hangs++;
          throw new Error(`no answer within ${timeoutMs} ms: ${r.route.method} ${r.path}`);
        }
        throw new Error(`${r.route.method} ${r.path}: ${(error as Error).message}`);
      }
      const key = String(status);
      result.byStatus[key] = (result.byStatus[key] ?? 0) + 1;
      if (status >= 500 && !o.allowed5xx(r.route, status, text)) {
        result.undocumented5xx++;
        throw new Error(
          `${status} for ${r.route.method} ${r.path} body=${r.body?.slice(0, 300)} answer=${text.slice(0, 300)}`,
        );
      }
    }),
    { numRuns: o.numRuns, seed: o.seed, ...(o.path ? { path: o.path } : {}), endOnFailure: true },
  );
  return result;
}

/**
 * A short fuzz run of another seed before "idle" memory is measured: every route's code (handlers,
 * schemas, error paths) is compiled on first use, which is growth of a fresh process, not memory the
 * fuzz run leaves behind. A server in service is warm; its idle is measured warm.
 */
export async function warmUp(o: FuzzOptions): Promise<void> {
  await fuzzHttp({ ...o, numRuns: FUZZ_WARM_UP, seed: o.seed + 1, path: undefined });
}

export const FUZZ_WARM_UP = 200;
