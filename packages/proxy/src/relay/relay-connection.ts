import type { IncomingHttpHeaders } from "node:http";
import type { WebSocket } from "ws";
import type { BodySink, UpstreamCall, UpstreamStart, UpstreamTransport } from "../upstream.js";
import { decodeFrame, type ProxyMessage, WorkerMessageSchema } from "./protocol.js";

/** The error codes `isTimeoutError` knows, so a silent worker is a 504 like a silent HTTP upstream. */
class RelayTimeoutError extends Error {
  constructor(
    readonly code: "UND_ERR_HEADERS_TIMEOUT" | "UND_ERR_BODY_TIMEOUT",
    message: string,
  ) {
    super(message);
    this.name = "RelayTimeoutError";
  }
}

interface Pending {
  started: boolean;
  resolveStart(s: UpstreamStart): void;
  rejectStart(e: Error): void;
  sink: BodySink | null;
  queued: Buffer[];
  ended: boolean;
  failure: Error | null;
  timer: NodeJS.Timeout | null;
  timeoutMs: number;
}

/**
 * One connected relay worker as an upstream: each call is a `request` frame, its answer the worker's
 * `start`/`data`/`end` frames. When the socket goes, every call in flight fails at once (before its
 * first byte: the proxy fails over to another backend; mid-stream: a partial span), never silently.
 */
export class RelayConnection implements UpstreamTransport {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closedReason: string | null = null;

  constructor(
    readonly workerId: string,
    private readonly socket: WebSocket,
  ) {}

  get inflight(): number {
    return this.pending.size;
  }

  private send(message: ProxyMessage): void {
    if (this.closedReason === null) this.socket.send(JSON.stringify(message));
  }

  call(
    method: "GET" | "POST",
    subpath: string,
    body: Buffer | null,
    timeoutMs: number,
    accept: string,
  ): UpstreamCall {
    const id = this.nextId++;
    let resolveStart!: (s: UpstreamStart) => void;
    let rejectStart!: (e: Error) => void;
    const started = new Promise<UpstreamStart>((resolve, reject) => {
      resolveStart = resolve;
      rejectStart = reject;
    });
    const p: Pending = {
      started: false,
      resolveStart,
      rejectStart,
      sink: null,
      queued: [],
      ended: false,
      failure: null,
      timer: null,
      timeoutMs,
    };
    if (this.closedReason !== null) {
      rejectStart(new Error(this.closedReason));
    } else {
      this.pending.set(id, p);
      this.arm(id, p);
      this.send({
        type: "request",
        id,
        method,
        path: subpath,
        accept,
        body: body ? body.toString("utf8") : null,
      });
    }
    return {
      started,
      attach: (sink) => {
        p.sink = sink;
        for (const chunk of p.queued) sink.onData(chunk);
        p.queued = [];
        if (p.failure) sink.onError(p.failure);
        else if (p.ended) sink.onEnd();
      },
      abort: (reason) => {
        if (!this.pending.has(id)) return;
        this.send({ type: "cancel", id });
        this.fail(id, reason);
      },
      pause: () => {
        if (this.pending.has(id)) this.send({ type: "pause", id });
      },
      resume: () => {
        if (this.pending.has(id)) this.send({ type: "resume", id });
      },
    };
  }

  /** (Re)start the silence timer: headers first, then between body chunks, as for HTTP upstreams. */
  private arm(id: number, p: Pending): void {
    if (p.timer) clearTimeout(p.timer);
    p.timer = setTimeout(() => {
      const code = p.started ? "UND_ERR_BODY_TIMEOUT" : "UND_ERR_HEADERS_TIMEOUT";
      this.send({ type: "cancel", id });
      this.fail(
        id,
        new RelayTimeoutError(code, `relay worker ${this.workerId} sent nothing for ${p.timeoutMs} ms`),
      );
    }, p.timeoutMs);
    p.timer.unref();
  }

  private fail(id: number, error: Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (p.timer) clearTimeout(p.timer);
    if (!p.started) {
      p.started = true;
      p.rejectStart(error);
    } else if (p.sink) p.sink.onError(error);
    else p.failure = error;
  }

  /** A frame from the worker; false when it broke the protocol (the socket is then closed). */
  onFrame(data: unknown): boolean {
    const m = decodeFrame(WorkerMessageSchema, data);
    if (m === null || m.type === "hello") return false;
    const p = this.pending.get(m.id);
    if (!p) return true; // a late frame of a cancelled call
    switch (m.type) {
      case "start": {
        if (p.started) return false;
        p.started = true;
        p.resolveStart({ status: m.status, headers: m.headers as IncomingHttpHeaders });
        if (m.body === undefined) {
          this.arm(m.id, p);
          return true;
        }
        // the whole answer in one frame
        this.pending.delete(m.id);
        if (p.timer) clearTimeout(p.timer);
        if (m.body) p.queued.push(Buffer.from(m.body, "utf8"));
        p.ended = true;
        return true;
      }
      case "data": {
        if (!p.started) return false;
        this.arm(m.id, p);
        const chunk = Buffer.from(m.data, "utf8");
        if (p.sink) p.sink.onData(chunk);
        else p.queued.push(chunk);
        return true;
      }
      case "end": {
        if (!p.started) return false;
        this.pending.delete(m.id);
        if (p.timer) clearTimeout(p.timer);
        if (p.sink) p.sink.onEnd();
        else p.ended = true;
        return true;
      }
      case "error":
        this.fail(m.id, new Error(`relay worker ${this.workerId}: ${m.message}`));
        return true;
    }
  }

  /** The socket is gone: every call in flight fails now. */
  close(reason: string): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    for (const id of [...this.pending.keys()]) this.fail(id, new Error(reason));
  }
}
