import type {
  Attempt,
  AttemptedRollout,
  PaginatedResult,
  ResourcesUpdate,
  Rollout,
  RolloutMode,
  RolloutStatus,
  Span,
  Worker,
} from "@agl/core";

/** The store answered 401/403: the page asks for the bearer token. */
export class UnauthorizedError extends Error {
  override readonly name = "UnauthorizedError";
}

/** No answer at all (connection refused, DNS, CORS, timeout), or a proxy in front said 502/504. */
export class StoreUnreachableError extends Error {
  override readonly name = "StoreUnreachableError";
}

/** Any other non-2xx answer; `detail` is the store's message. */
export class StoreHttpError extends Error {
  override readonly name = "StoreHttpError";
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`store answered ${status}: ${detail}`);
  }
}

export interface RolloutListQuery {
  statusIn?: RolloutStatus[];
  rolloutIdContains?: string;
  /** agl-ts extensions of the query (send them only when {@link StoreApi.storeKind} is "agl-ts"). */
  modeIn?: RolloutMode[];
  dataIdContains?: string;
  sortBy?: string;
  sortOrder?: "asc" | "desc";
  limit: number;
  offset: number;
}

export interface StoreApiOptions {
  /** Where /v1/agl lives, e.g. "" (same origin) or "http://127.0.0.1:4747". */
  baseUrl: string;
  token?: () => string | null;
  fetch?: typeof fetch;
  /** Per-request timeout in ms. Default 15 s. */
  timeoutMs?: number;
}

/**
 * Which implementation answers: "agl-ts" (its server marks every answer with {@link AGL_SERVER_HEADER},
 * as `@agl/client`'s `serverInfo()` checks) or "agentlightning" (Python Agent Lightning or another
 * server of the v0.3 API, without the agl-ts query extensions).
 */
export type StoreKind = "agl-ts" | "agentlightning";
export const AGL_SERVER_HEADER = "x-agl-server";

/** Largest span page the detail view reads per request, and the most spans it reads for one rollout. */
export const SPAN_PAGE = 1000;
export const MAX_SPANS_PER_ROLLOUT = 20_000;

/**
 * Read-only client of the Agent Lightning v0.3 REST API (only routes a Python store server has too;
 * the agl-ts query extensions only after {@link StoreApi.storeKind} says "agl-ts").
 * Queries go through POST .../search with null keys omitted, the way the reference client sends them.
 */
export class StoreApi {
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  private kind: Promise<StoreKind> | undefined;

  constructor(private readonly options: StoreApiOptions) {
    this.fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.timeoutMs = options.timeoutMs ?? 15_000;
  }

  private async request<T>(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    onResponse?: (response: Response) => void,
  ): Promise<T> {
    // x-agl-client: the dashboard shows the errors it gets (the store warns only for clients that may not).
    const headers: Record<string, string> = { accept: "application/json", "x-agl-client": "agl-dashboard" };
    const token = this.options.token?.();
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await this.fetchImpl(`${this.options.baseUrl}/v1/agl${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      throw new StoreUnreachableError(`cannot reach the store: ${(error as Error).message}`);
    }
    if (response.status === 401 || response.status === 403) {
      throw new UnauthorizedError(await detailOf(response));
    }
    if (response.status === 502 || response.status === 503 || response.status === 504) {
      throw new StoreUnreachableError(await detailOf(response));
    }
    if (!response.ok) throw new StoreHttpError(response.status, await detailOf(response));
    onResponse?.(response);
    return (await response.json()) as T;
  }

  health(): Promise<{ status: string }> {
    return this.request("GET", "/health");
  }

  statistics(): Promise<Record<string, unknown>> {
    return this.request("GET", "/statistics");
  }

  /** The store's kind, from the marker header of one GET /statistics (asked again only after a failure). */
  storeKind(): Promise<StoreKind> {
    if (!this.kind) {
      let kind: StoreKind = "agentlightning";
      const asked = this.request("GET", "/statistics", undefined, (response) => {
        if (response.headers.get(AGL_SERVER_HEADER) !== null) kind = "agl-ts";
      }).then(() => kind);
      asked.catch(() => {
        if (this.kind === asked) this.kind = undefined;
      });
      this.kind = asked;
    }
    return this.kind;
  }

  queryRollouts(query: RolloutListQuery): Promise<PaginatedResult<Rollout | AttemptedRollout>> {
    return this.request("POST", "/rollouts/search", {
      ...(query.statusIn?.length ? { status_in: query.statusIn } : {}),
      ...(query.rolloutIdContains ? { rollout_id_contains: query.rolloutIdContains } : {}),
      ...(query.modeIn?.length ? { mode_in: query.modeIn } : {}),
      ...(query.dataIdContains ? { data_id_contains: query.dataIdContains } : {}),
      ...(query.sortBy ? { sort_by: query.sortBy, sort_order: query.sortOrder ?? "asc" } : {}),
      limit: query.limit,
      offset: query.offset,
    });
  }

  getRollout(rolloutId: string): Promise<Rollout | AttemptedRollout | null> {
    return this.request("GET", `/rollouts/${encodeURIComponent(rolloutId)}`);
  }

  async queryAttempts(rolloutId: string): Promise<Attempt[]> {
    const page = await this.request<PaginatedResult<Attempt>>(
      "POST",
      `/rollouts/${encodeURIComponent(rolloutId)}/attempts/search`,
      { sort_by: "sequence_id", sort_order: "asc", limit: -1, offset: 0 },
    );
    return page.items;
  }

  querySpanPage(
    rolloutId: string,
    filter: { attemptId?: string; name?: string; limit: number; offset: number },
  ): Promise<PaginatedResult<Span>> {
    return this.request("POST", "/spans/search", {
      rollout_id: rolloutId,
      ...(filter.attemptId ? { attempt_id: filter.attemptId } : {}),
      ...(filter.name ? { name: filter.name } : {}),
      sort_by: "sequence_id",
      sort_order: "asc",
      limit: filter.limit,
      offset: filter.offset,
    });
  }

  /** Every span of one attempt (or of the rollout), page by page, up to MAX_SPANS_PER_ROLLOUT. */
  async querySpans(rolloutId: string, attemptId?: string): Promise<{ spans: Span[]; total: number }> {
    const spans: Span[] = [];
    let total = 0;
    do {
      const page = await this.querySpanPage(rolloutId, { attemptId, limit: SPAN_PAGE, offset: spans.length });
      total = page.total;
      spans.push(...page.items);
      if (page.items.length === 0) break;
    } while (spans.length < total && spans.length < MAX_SPANS_PER_ROLLOUT);
    return { spans, total };
  }

  queryResources(limit: number, offset: number): Promise<PaginatedResult<ResourcesUpdate>> {
    return this.request("GET", `/resources?limit=${limit}&offset=${offset}`);
  }

  queryWorkers(limit: number, offset: number): Promise<PaginatedResult<Worker>> {
    return this.request("POST", "/workers/search", {
      sort_by: "worker_id",
      sort_order: "asc",
      limit,
      offset,
    });
  }
}

async function detailOf(response: Response): Promise<string> {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { detail?: unknown };
    if (typeof body.detail === "string") return body.detail;
    if (body.detail !== undefined) return JSON.stringify(body.detail);
  } catch {
    // not JSON: fall through to the text
  }
  return text.slice(0, 300) || response.statusText || `HTTP ${response.status}`;
}
