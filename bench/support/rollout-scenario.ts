/**
 * The requests of Agent Lightning's `rollout` micro-benchmark (tests/benchmark/micro_benchmark.py,
 * v0.3) and of a Python runner exporting one OTLP request per span, sent over HTTP exactly as the
 * Python LightningStoreClient sends them: a fresh connection per rollout (the benchmark runs each
 * rollout in its own `asyncio.run`, so its aiohttp session is new), then in order
 *   POST /v1/agl/rollouts   (start_rollout: every field explicit, nulls included)
 *   POST /v1/agl/spans × 4  (add_span: the full pydantic Span dump, sequence ids chosen by the client)
 *   POST /v1/agl/rollouts/{rid}/attempts/{aid}  {"status": "succeeded"}
 * The Python client cannot run here, so this driver stands in for it; only the server's and the
 * database's CPU are measured, so the driver's own cost does not enter the comparison.
 */
import { Agent, request } from "node:http";
import { ExportTraceServiceRequest } from "../../packages/store/src/server/otlp/proto.js";
import { seededRandom } from "./seeded-random.js";

const { randomString } = seededRandom(7);

/** One HTTP/1.1 keep-alive connection, as one aiohttp session of the Python client. */
export class Connection {
  /** Requests answered on every Connection of this process (the servers no longer log each at info). */
  static answered = 0;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });
  constructor(private readonly base: URL) {}

  /**
   * POST and read the answer. A reused keep-alive socket the server had just closed as idle fails
   * before the request was read (ECONNRESET on a reused socket): that request is sent again once, as
   * HTTP clients (aiohttp included) do.
   */
  async post(path: string, body: Uint8Array | string, contentType = "application/json"): Promise<string> {
    try {
      return await this.send(path, body, contentType);
    } catch (error) {
      if ((error as { retryable?: boolean }).retryable) return this.send(path, body, contentType);
      throw error;
    }
  }

  private send(path: string, body: Uint8Array | string, contentType: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          agent: this.agent,
          host: this.base.hostname,
          port: this.base.port,
          method: "POST",
          path,
          headers: { "content-type": contentType, "content-length": Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            Connection.answered++;
            const text = Buffer.concat(chunks).toString();
            if ((res.statusCode ?? 0) >= 300) reject(new Error(`${path}: ${res.statusCode} ${text}`));
            else resolve(text);
          });
          res.on("error", reject);
        },
      );
      req.on("error", (error: NodeJS.ErrnoException) => {
        if (req.reusedSocket && error.code === "ECONNRESET") Object.assign(error, { retryable: true });
        reject(error);
      });
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** micro_benchmark.py's _make_span: one random attribute (key 3-20 chars, value 5-300), ids from the seq. */
function pythonSpan(rid: string, aid: string, seq: number, name: string): string {
  const trace = seq.toString(16).padStart(32, "0");
  const span = seq.toString(16).padStart(16, "0");
  return JSON.stringify({
    rollout_id: rid,
    attempt_id: aid,
    sequence_id: seq,
    trace_id: trace,
    span_id: span,
    parent_id: null,
    name,
    status: { status_code: "OK", description: null },
    attributes: { [randomString(3, 20)]: randomString(5, 300) },
    events: [],
    links: [],
    start_time: null,
    end_time: null,
    context: { trace_id: trace, span_id: span, is_remote: false, trace_state: {} },
    parent: null,
    resource: { attributes: {}, schema_url: "" },
  });
}

const startBody = (task: number) =>
  JSON.stringify({
    input: { task },
    mode: null,
    resources_id: null,
    config: null,
    metadata: null,
    worker_id: null,
  });

/** start_rollout on a fresh connection, `body(rid, aid)`, then the attempt succeeds (as the Python client does it). */
async function rolloutOnNewConnection(
  base: URL,
  task: number,
  body: (conn: Connection, rid: string, aid: string) => Promise<void>,
): Promise<void> {
  const conn = new Connection(base);
  try {
    const started = JSON.parse(await conn.post("/v1/agl/rollouts", startBody(task))) as {
      rollout_id: string;
      attempt: { attempt_id: string };
    };
    const rid = started.rollout_id;
    const aid = started.attempt.attempt_id;
    await body(conn, rid, aid);
    await conn.post(
      `/v1/agl/rollouts/${encodeURIComponent(rid)}/attempts/${encodeURIComponent(aid)}`,
      JSON.stringify({ status: "succeeded" }),
    );
  } finally {
    conn.close();
  }
}

/** One rollout of the `rollout` mode: start, 4 spans, succeed. */
export function pythonRollout(base: URL, task: number, spansPerAttempt = 4): Promise<void> {
  return rolloutOnNewConnection(base, task, async (conn, rid, aid) => {
    for (let seq = 1; seq <= spansPerAttempt; seq++) {
      await conn.post(
        "/v1/agl/spans",
        pythonSpan(rid, aid, task * spansPerAttempt + seq, `micro-span-${seq}`),
      );
    }
  });
}

/** Run `total` tasks with `concurrency` workers, each task through `run`; the tasks' wall times (s). */
export async function runPool(
  total: number,
  concurrency: number,
  run: (task: number) => Promise<void>,
): Promise<number[]> {
  let next = 0;
  const times: number[] = [];
  const worker = async () => {
    while (next < total) {
      const task = next++;
      const t0 = performance.now();
      await run(task);
      times.push((performance.now() - t0) / 1000);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  return times;
}

// --- a Python runner with OtelTracer: one OTLP/protobuf request per span

const kv = (key: string, value: string) => ({ key, value: { stringValue: value } });

function otlpOneSpan(rid: string, aid: string, n: number): Uint8Array {
  const now = BigInt(Date.now()) * 1_000_000n;
  const message = ExportTraceServiceRequest.fromObject({
    resourceSpans: [
      {
        resource: {
          attributes: [
            kv("service.name", "agent"),
            kv("agentlightning.rollout_id", rid),
            kv("agentlightning.attempt_id", aid),
          ],
        },
        scopeSpans: [
          {
            scope: { name: "agentlightning" },
            spans: [
              {
                traceId: Buffer.from(rid.padEnd(16, "0").slice(0, 16)),
                spanId: Buffer.from(n.toString(16).padStart(8, "0")),
                name: `llm-call-${n}`,
                kind: 1,
                startTimeUnixNano: now.toString(),
                endTimeUnixNano: (now + 1_000_000n).toString(),
                attributes: [kv("gen_ai.prompt", randomString(20, 200))],
                status: { code: 1 },
              },
            ],
          },
        ],
      },
    ],
  });
  return ExportTraceServiceRequest.encode(message).finish();
}

/** start_rollout, `spans` single-span OTLP exports one after another, then the attempt succeeds. */
export function otlpRollout(base: URL, task: number, spans: number): Promise<void> {
  return rolloutOnNewConnection(base, task, async (conn, rid, aid) => {
    for (let n = 0; n < spans; n++)
      await conn.post("/v1/traces", otlpOneSpan(rid, aid, n), "application/x-protobuf");
  });
}
