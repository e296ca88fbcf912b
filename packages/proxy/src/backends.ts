import { createHash } from "node:crypto";
import { Pool } from "undici";
import { callUpstream, collectBody, type UpstreamTransport } from "./upstream.js";

export interface BackendConfig {
  /** OpenAI-compatible base URL, with or without the trailing `/v1`. */
  url: string;
  /** Model name this upstream serves; the request's `model` is rewritten to it. */
  model?: string;
  /** Relative share of rollouts (rendezvous weight). Default 1. */
  weight?: number;
  /** Sent upstream as `Authorization: Bearer`. */
  apiKey?: string;
}

export interface BackendState {
  url: string;
  model: string | null;
  weight: number;
  healthy: boolean;
  inflight: number;
  consecutiveFailures: number;
  lastError: string | null;
}

/** One upstream, with its connection pool and health. */
export class Backend {
  readonly url: string;
  /** Changed at run time by `LLMProxy.setBackendModel` (e.g. a new LoRA adapter per policy version). */
  model: string | null;
  readonly weight: number;
  readonly apiKey: string | null;
  readonly origin: string;
  /** Path prefix up to and including `/v1`, e.g. `/v1` or `/serving/v1`. */
  readonly apiPath: string;
  /**
   * Keep-alive connections: a fresh TCP connection per call would dominate the added latency. Null for a
   * backend reached another way (`transport`: a relay worker's WebSocket).
   */
  readonly pool: Pool | null;
  readonly transport: UpstreamTransport | null;
  /** Precomputed so the per-request rendezvous hash only hashes the key. */
  readonly hashSeed: string;
  healthy = true;
  inflight = 0;
  consecutiveFailures = 0;
  ejectedUntil = 0;
  lastError: string | null = null;

  constructor(config: BackendConfig, transport: UpstreamTransport | null = null) {
    const parsed = new URL(config.url);
    if (transport === null && parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new Error(`backend url must be http(s): ${config.url}`);
    }
    let path = parsed.pathname.replace(/\/+$/, "");
    if (!path.endsWith("/v1")) path = `${path}/v1`;
    this.origin = parsed.origin;
    this.apiPath = path;
    this.url = `${parsed.protocol}//${parsed.host}${path}`;
    this.model = config.model ?? null;
    this.weight = config.weight ?? 1;
    if (!(this.weight > 0)) throw new Error(`backend weight must be > 0: ${config.url}`);
    this.apiKey = config.apiKey ?? null;
    this.hashSeed = this.url;
    this.transport = transport;
    this.pool = transport
      ? null
      : new Pool(this.origin, { connections: 1024, pipelining: 1, keepAliveTimeout: 4_000 });
  }

  available(now: number): boolean {
    return this.healthy && now >= this.ejectedUntil;
  }

  state(): BackendState {
    return {
      url: this.url,
      model: this.model,
      weight: this.weight,
      healthy: this.available(Date.now()),
      inflight: this.inflight,
      consecutiveFailures: this.consecutiveFailures,
      lastError: this.lastError,
    };
  }
}

export interface BackendPoolOptions {
  /** Passive ejection: this many consecutive failures take a backend out for `cooldownMs`. */
  allowedFailures?: number;
  cooldownMs?: number;
  /** Active health checks (GET {url}/models); 0 disables. */
  healthCheckIntervalMs?: number;
  healthCheckTimeoutMs?: number;
  onWarning?: (message: string) => void;
  /** Start with no backend (relay mode: workers join later). */
  allowEmpty?: boolean;
}

/**
 * Upstreams with rollout-sticky selection by weighted rendezvous hashing: each (key, backend) pair gets a
 * score and the highest wins, so adding or removing a backend moves only the keys that scored highest on
 * it (about 1/N), and every rollout keeps hitting the same replica's prefix cache.
 */
export class BackendPool {
  /** Configured HTTP backends, then relay workers while they are connected (`add`/`remove`). */
  readonly backends: Backend[];
  private readonly allowedFailures: number;
  private readonly cooldownMs: number;
  private readonly healthCheckTimeoutMs: number;
  private timer: NodeJS.Timeout | null = null;
  private roundRobin = 0;

  constructor(
    configs: BackendConfig[],
    private readonly options: BackendPoolOptions = {},
  ) {
    if (configs.length === 0 && !options.allowEmpty) throw new Error("at least one backend is required");
    this.backends = configs.map((c) => new Backend(c));
    this.allowedFailures = options.allowedFailures ?? 3;
    this.cooldownMs = options.cooldownMs ?? 10_000;
    this.healthCheckTimeoutMs = options.healthCheckTimeoutMs ?? 2_000;
  }

  /**
   * Backends in preference order for `key`: available ones by descending rendezvous score, then the
   * unavailable ones (a last resort beats failing outright). No key: least in-flight, round-robin ties.
   */
  rank(key: string | null): Backend[] {
    const now = Date.now();
    const list = this.backends;
    if (list.length <= 1) return [...list];
    let scored: Array<{ b: Backend; s: number }>;
    if (key === null) {
      const start = this.roundRobin++ % list.length;
      scored = list.map((b, i) => ({ b, s: -b.inflight - ((i - start + list.length) % list.length) / 1e6 }));
    } else {
      scored = list.map((b) => ({ b, s: rendezvousScore(key, b) }));
    }
    scored.sort((x, y) => {
      const ax = x.b.available(now) ? 1 : 0;
      const ay = y.b.available(now) ? 1 : 0;
      return ax !== ay ? ay - ax : y.s - x.s;
    });
    return scored.map((x) => x.b);
  }

  /** A backend that joined (a relay worker that connected). */
  add(backend: Backend): void {
    this.backends.push(backend);
  }

  /** A backend that left; calls already ranked onto it fail over as for any dead backend. */
  remove(backend: Backend): void {
    const i = this.backends.indexOf(backend);
    if (i !== -1) this.backends.splice(i, 1);
  }

  recordSuccess(backend: Backend): void {
    backend.consecutiveFailures = 0;
    backend.lastError = null;
  }

  recordFailure(backend: Backend, reason: string): void {
    backend.consecutiveFailures++;
    backend.lastError = reason;
    if (backend.consecutiveFailures >= this.allowedFailures) {
      backend.ejectedUntil = Date.now() + this.cooldownMs;
    }
  }

  startHealthChecks(): void {
    const interval = this.options.healthCheckIntervalMs ?? 5_000;
    if (interval <= 0 || this.timer) return;
    void this.checkAll();
    this.timer = setInterval(() => void this.checkAll(), interval);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await Promise.all(this.backends.map((b) => b.pool?.destroy().catch(() => undefined)));
  }

  async checkAll(): Promise<void> {
    await Promise.all(this.backends.map((b) => this.check(b)));
  }

  private async check(backend: Backend): Promise<void> {
    let reason: string | null = null;
    try {
      const call = callUpstream(
        backend,
        "GET",
        "models",
        null,
        this.healthCheckTimeoutMs,
        "application/json",
      );
      const { status } = await call.started;
      await collectBody(call);
      if (status >= 500) reason = `HTTP ${status}`;
    } catch (error) {
      reason = (error as Error).message;
    }
    if (reason === null) {
      if (!backend.healthy) this.options.onWarning?.(`backend ${backend.url} is healthy again`);
      backend.healthy = true;
      backend.ejectedUntil = 0;
      backend.consecutiveFailures = 0;
    } else {
      if (backend.healthy)
        this.options.onWarning?.(`backend ${backend.url} failed its health check: ${reason}`);
      backend.healthy = false;
      backend.lastError = reason;
    }
  }
}

/** Weighted rendezvous score: -w / ln(u) with u a uniform (0,1) hash of (key, backend). */
export function rendezvousScore(key: string, backend: Pick<Backend, "hashSeed" | "weight">): number {
  const digest = createHash("sha1").update(key).update("\0").update(backend.hashSeed).digest();
  // 52 bits of the digest → a uniform double in (0, 1)
  const hi = digest.readUInt32BE(0) >>> 12; // 20 bits
  const lo = digest.readUInt32BE(4); // 32 bits
  const u = (hi * 2 ** 32 + lo + 0.5) / 2 ** 52;
  return -backend.weight / Math.log(u);
}
