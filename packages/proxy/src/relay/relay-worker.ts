import { hostname } from "node:os";
import type { Readable } from "node:stream";
import { request } from "undici";
import { WebSocket } from "ws";
import type { ProxyLogger } from "../options.js";
import { backoffMs } from "../upstream.js";
import {
  decodeFrame,
  type ProxyMessage,
  ProxyMessageSchema,
  RELAY_PROTOCOL_VERSION,
  type WorkerMessage,
} from "./protocol.js";
import { RELAY_PATH } from "./relay-hub.js";

export interface RelayWorkerOptions {
  /** The proxy, `ws(s)://host:port` (the `/ws/worker` path is added when missing). */
  proxy: string;
  /** The local engine's OpenAI-compatible base URL, e.g. `http://127.0.0.1:8000/v1`. */
  upstream: string;
  /** The proxy's worker token. */
  token: string;
  /** Stable across reconnects so rollouts stay on this worker's prefix cache. Default: host name + pid. */
  workerId?: string;
  /** Models to announce; default: what the engine lists at `GET /models`. */
  models?: string[];
  /** Sent to the engine as `Authorization: Bearer`. */
  upstreamApiKey?: string;
  /** Reconnect backoff: min(base·2^n, max) ±25 %. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  logger?: ProxyLogger;
}

export interface RelayWorker {
  readonly workerId: string;
  /** Resolves once the proxy has welcomed the first connection. */
  readonly ready: Promise<void>;
  /** Connected and welcomed right now. */
  readonly connected: boolean;
  /** Connections made so far (1 + reconnects). */
  readonly connections: number;
  stop(): Promise<void>;
}

const consoleLogger: ProxyLogger = {
  warn: (m) => console.warn(`[agl-relay-worker] ${m}`),
  error: (m) => console.error(`[agl-relay-worker] ${m}`),
};

function workerUrl(proxy: string): string {
  const u = new URL(proxy);
  if (u.protocol === "http:") u.protocol = "ws:";
  if (u.protocol === "https:") u.protocol = "wss:";
  if (u.protocol !== "ws:" && u.protocol !== "wss:") throw new Error(`--proxy must be ws(s)://: ${proxy}`);
  if (!u.pathname.endsWith(RELAY_PATH)) u.pathname = `${u.pathname.replace(/\/+$/, "")}${RELAY_PATH}`;
  return u.toString();
}

/**
 * An inference worker that dials out to a relay-mode proxy (for engines behind NAT or a firewall), says
 * which models it serves and forwards the proxy's requests to the local engine, streams included.
 * Reconnects with exponential backoff whenever the connection drops or is refused.
 */
export function startRelayWorker(options: RelayWorkerOptions): RelayWorker {
  const url = workerUrl(options.proxy);
  const upstream = new URL(options.upstream.replace(/\/+$/, ""));
  if (upstream.protocol !== "http:" && upstream.protocol !== "https:")
    throw new Error(`--upstream must be http(s)://: ${options.upstream}`);
  if (!upstream.pathname.endsWith("/v1")) upstream.pathname = `${upstream.pathname.replace(/\/+$/, "")}/v1`;
  const base = upstream.toString().replace(/\/+$/, "");
  const log = options.logger ?? consoleLogger;
  const workerId = options.workerId ?? `${hostname()}-${process.pid}`;
  const backoffBase = options.backoffBaseMs ?? 500;
  const backoffMax = options.backoffMaxMs ?? 30_000;
  const engineHeaders = (accept: string, withBody: boolean): Record<string, string> => ({
    accept,
    ...(withBody ? { "content-type": "application/json" } : {}),
    ...(options.upstreamApiKey ? { authorization: `Bearer ${options.upstreamApiKey}` } : {}),
  });

  let stopped = false;
  let connected = false;
  let connections = 0;
  let failures = 0;
  let socket: WebSocket | null = null;
  let retryTimer: NodeJS.Timeout | null = null;
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  /** Requests being served on the current connection. */
  const active = new Map<number, { abort: AbortController; body: Readable | null }>();

  async function announcedModels(): Promise<string[]> {
    if (options.models) return options.models;
    const r = await request(`${base}/models`, { headers: engineHeaders("application/json", false) });
    const json: any = await r.body.json();
    if (r.statusCode >= 400) throw new Error(`engine GET /models answered ${r.statusCode}`);
    return Array.isArray(json?.data) ? json.data.map((m: any) => String(m.id)) : [];
  }

  function send(ws: WebSocket, m: WorkerMessage): void {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(m));
  }

  async function serve(ws: WebSocket, m: Extract<ProxyMessage, { type: "request" }>): Promise<void> {
    const abort = new AbortController();
    const entry = { abort, body: null as Readable | null };
    active.set(m.id, entry);
    try {
      const r = await request(`${base}/${m.path}`, {
        method: m.method,
        headers: engineHeaders(m.accept, m.body !== null),
        body: m.body ?? undefined,
        signal: abort.signal,
        // the proxy bounds silences itself; the engine may think for long
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      entry.body = r.body;
      const headers: Record<string, string> = {};
      for (const name of ["content-type", "retry-after"]) {
        const v = r.headers[name];
        if (typeof v === "string") headers[name] = v;
      }
      if (!headers["content-type"]?.startsWith("text/event-stream")) {
        // a whole answer (JSON, errors) goes in one frame: fewer frames, less work on both sides
        send(ws, { type: "start", id: m.id, status: r.statusCode, headers, body: await r.body.text() });
        return;
      }
      send(ws, { type: "start", id: m.id, status: r.statusCode, headers });
      const decoder = new TextDecoder();
      for await (const chunk of r.body) {
        // decoded as a stream: a character split across chunks is sent whole with the next one
        const text = decoder.decode(chunk as Buffer, { stream: true });
        if (text) send(ws, { type: "data", id: m.id, data: text });
      }
      const rest = decoder.decode();
      if (rest) send(ws, { type: "data", id: m.id, data: rest });
      send(ws, { type: "end", id: m.id });
    } catch (error) {
      if (!abort.signal.aborted) send(ws, { type: "error", id: m.id, message: (error as Error).message });
    } finally {
      active.delete(m.id);
    }
  }

  function onMessage(ws: WebSocket, data: unknown): void {
    const m = decodeFrame(ProxyMessageSchema, data);
    if (m === null) {
      log.warn("ignored a malformed frame from the proxy");
      return;
    }
    switch (m.type) {
      case "welcome":
        connected = true;
        failures = 0;
        log.warn(`connected to ${url} as ${workerId}`);
        markReady();
        return;
      case "request":
        void serve(ws, m);
        return;
      case "cancel":
        active.get(m.id)?.abort.abort();
        return;
      case "pause":
        active.get(m.id)?.body?.pause();
        return;
      case "resume":
        active.get(m.id)?.body?.resume();
        return;
    }
  }

  function scheduleReconnect(): void {
    if (stopped || retryTimer) return;
    const delay = backoffMs(failures++, backoffBase, backoffMax);
    log.warn(`reconnecting in ${Math.round(delay)} ms`);
    retryTimer = setTimeout(() => {
      retryTimer = null;
      connect();
    }, delay);
  }

  function connect(): void {
    if (stopped) return;
    connections++;
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${options.token}` },
      handshakeTimeout: 10_000,
    });
    socket = ws;
    ws.on("open", () => {
      announcedModels().then(
        (models) =>
          send(ws, { type: "hello", protocol: RELAY_PROTOCOL_VERSION, worker_id: workerId, models }),
        (error) => {
          log.warn(`cannot list the engine's models: ${(error as Error).message}`);
          ws.close(1011, "engine unavailable");
        },
      );
    });
    ws.on("message", (data) => onMessage(ws, data));
    ws.on("unexpected-response", (_req, res) => {
      log.error(`the proxy refused the connection: HTTP ${res.statusCode}`);
      ws.terminate();
    });
    ws.on("error", (e) => log.warn(`connection error: ${e.message}`));
    ws.on("close", () => {
      connected = false;
      // the proxy has failed these calls already; free the engine's sequences
      for (const a of active.values()) a.abort.abort();
      active.clear();
      if (socket === ws) socket = null;
      scheduleReconnect();
    });
  }

  connect();
  return {
    workerId,
    ready,
    get connected() {
      return connected;
    },
    get connections() {
      return connections;
    },
    async stop() {
      stopped = true;
      if (retryTimer) clearTimeout(retryTimer);
      retryTimer = null;
      const ws = socket;
      if (!ws) return;
      await new Promise<void>((resolve) => {
        ws.once("close", () => resolve());
        ws.close(1000, "worker stopping");
        setTimeout(() => ws.terminate(), 2_000).unref();
      });
    },
  };
}
