import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import { Backend, type BackendPool } from "../backends.js";
import type { ProxyLogger } from "../options.js";
import { credentialOf, safeEqual } from "../scoped-tokens.js";
import { decodeFrame, type ProxyMessage, RELAY_PROTOCOL_VERSION, WorkerMessageSchema } from "./protocol.js";
import { RelayConnection } from "./relay-connection.js";

export const RELAY_PATH = "/ws/worker";

export interface RelayHubOptions {
  /** What workers present as `Authorization: Bearer` (or `x-api-key`) on the upgrade. */
  workerToken: string;
  /** A worker must say hello within this long. */
  helloTimeoutMs: number;
  /** WebSocket ping period; a worker that misses a pong in one period is dropped. */
  pingIntervalMs: number;
  /** Largest frame accepted from a worker. */
  maxFrameBytes: number;
}

interface Worker {
  id: string;
  socket: WebSocket;
  connection: RelayConnection;
  backend: Backend;
  alive: boolean;
}

/**
 * Relay mode: inference workers behind NAT or firewalls dial out to `/ws/worker` and join the backend
 * pool while connected, under the same stickiness (rendezvous on the worker id, stable across
 * reconnects), health and failover rules as HTTP backends.
 */
export class RelayHub {
  private readonly wss: WebSocketServer;
  private readonly workers = new Map<string, Worker>();
  private readonly waiters = new Set<() => void>();
  private heartbeat: NodeJS.Timeout | null = null;

  constructor(
    private readonly o: RelayHubOptions,
    private readonly pool: BackendPool,
    private readonly log: ProxyLogger,
  ) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: o.maxFrameBytes });
    this.heartbeat = setInterval(() => this.ping(), o.pingIntervalMs);
    this.heartbeat.unref();
  }

  get connectedWorkers(): string[] {
    return [...this.workers.keys()];
  }

  /** The HTTP server's `upgrade` event: only `/ws/worker` with the worker token is accepted. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = (req.url ?? "").split("?")[0];
    const refuse = (status: number, text: string) => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
    };
    if (path !== RELAY_PATH) {
      refuse(404, "Not Found");
      return;
    }
    const credential = credentialOf(req.headers);
    if (credential === null || !safeEqual(credential, this.o.workerToken)) {
      this.log.warn(`relay: refused a worker from ${req.socket.remoteAddress} (bad or missing worker token)`);
      refuse(401, "Unauthorized");
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => this.onSocket(ws));
  }

  private onSocket(socket: WebSocket): void {
    const helloTimer = setTimeout(() => socket.close(1008, "no hello"), this.o.helloTimeoutMs);
    let worker: Worker | null = null;
    socket.on("message", (data, isBinary) => {
      if (isBinary) return socket.close(1003, "text frames only");
      if (worker === null) {
        const hello = decodeFrame(WorkerMessageSchema, data);
        if (hello?.type !== "hello" || hello.protocol !== RELAY_PROTOCOL_VERSION) {
          clearTimeout(helloTimer);
          return socket.close(1008, "expected hello");
        }
        clearTimeout(helloTimer);
        worker = this.register(hello.worker_id, hello.models, socket);
        return;
      }
      if (!worker.connection.onFrame(data)) socket.close(1008, "protocol violation");
    });
    socket.on("pong", () => {
      if (worker) worker.alive = true;
    });
    socket.on("error", (e) => this.log.warn(`relay: worker socket error: ${e.message}`));
    socket.on("close", (code, reason) => {
      clearTimeout(helloTimer);
      if (worker) this.unregister(worker, `relay worker ${worker.id} disconnected (${code} ${reason})`);
    });
  }

  private register(id: string, models: string[], socket: WebSocket): Worker {
    const previous = this.workers.get(id);
    // the same worker reconnecting (its old socket not yet noticed dead) replaces itself
    if (previous) this.unregister(previous, `relay worker ${id} reconnected`);
    const connection = new RelayConnection(id, socket);
    const backend = new Backend(
      { url: `relay://${encodeURIComponent(id)}/v1`, model: models[0] },
      connection,
    );
    const worker: Worker = { id, socket, connection, backend, alive: true };
    this.workers.set(id, worker);
    this.pool.add(backend);
    const welcome: ProxyMessage = { type: "welcome", worker_id: id };
    socket.send(JSON.stringify(welcome));
    this.log.warn(`relay: worker ${id} connected (models: ${models.join(", ") || "none announced"})`);
    for (const wake of [...this.waiters]) wake();
    return worker;
  }

  private unregister(worker: Worker, reason: string): void {
    if (this.workers.get(worker.id) === worker) this.workers.delete(worker.id);
    this.pool.remove(worker.backend);
    const lost = worker.connection.inflight;
    worker.connection.close(reason);
    if (worker.socket.readyState === worker.socket.OPEN) worker.socket.close(1001, "replaced");
    this.log.warn(`${reason}; ${lost} call(s) in flight failed`);
  }

  private ping(): void {
    for (const w of this.workers.values()) {
      if (!w.alive) {
        w.socket.terminate(); // its close event unregisters it
        continue;
      }
      w.alive = false;
      w.socket.ping();
    }
  }

  /** Resolves true once a worker is connected (at once if one is), false after `timeoutMs`. */
  waitForWorker(timeoutMs: number): Promise<boolean> {
    if (this.workers.size > 0) return Promise.resolve(true);
    if (timeoutMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(wake);
        resolve(false);
      }, timeoutMs);
      this.waiters.add(wake);
    });
  }

  async close(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    for (const w of [...this.workers.values()]) {
      this.unregister(w, `relay worker ${w.id} closed by the proxy`);
      w.socket.terminate();
    }
    for (const wake of [...this.waiters]) wake();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}
