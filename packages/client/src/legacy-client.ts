/**
 * AgentLightningClient: the legacy v0.1 task-polling client (Agent Lightning §3.4), for agents written
 * against AgentLightningServer: poll GET /task, fetch resources, POST /rollout with the result.
 */
import { parseOrThrow, type ResourcesUpdate, ResourcesUpdateSchema } from "@agl/core";
import ky, { type KyInstance } from "ky";
import { z } from "zod";
import { toHttpError } from "./http/transport.js";

export const LegacyTaskSchema = z.object({
  rollout_id: z.string(),
  input: z.any(),
  mode: z.string().nullable().default(null),
  resources_id: z.string().nullable().default(null),
  create_time: z.number().nullable().default(null),
  last_claim_time: z.number().nullable().default(null),
  num_claims: z.number().int().default(0),
  metadata: z.record(z.string(), z.any()).default(() => ({})),
});
export type LegacyTask = z.infer<typeof LegacyTaskSchema>;

const TaskIfAnySchema = z.object({ is_available: z.boolean(), task: LegacyTaskSchema.nullable().optional() });

/** The result of one task (v0.1 `Rollout`). */
export interface LegacyRollout {
  rollout_id: string;
  task?: LegacyTask | null;
  final_reward?: number | null;
  triplets?: unknown[] | null;
  /** OpenTelemetry spans as JSON. */
  trace?: unknown[] | null;
  logs?: string[] | null;
  metadata?: Record<string, unknown> | null;
}

const GenericResponseSchema = z.object({
  status: z.string(),
  message: z.string().nullable().optional(),
  data: z.unknown().optional(),
});
export type GenericResponse = z.infer<typeof GenericResponseSchema>;

export interface AgentLightningClientOptions {
  /** Server root, e.g. http://127.0.0.1:4747. */
  url: string;
  token?: string | null;
  /** Wait between polls when no task is available. Default 5000 ms (the reference). */
  pollIntervalMs?: number;
  /** Per-request timeout. Default 10 s (the reference). */
  timeoutMs?: number;
  /** Sent as ?worker_id= so the store links claims to this client. */
  workerId?: string;
}

export class AgentLightningClient {
  readonly url: string;
  private readonly http: KyInstance;
  private readonly pollIntervalMs: number;
  private readonly workerId: string | undefined;

  constructor(options: AgentLightningClientOptions) {
    this.url = options.url.replace(/\/+$/, "");
    this.pollIntervalMs = options.pollIntervalMs ?? 5000;
    this.workerId = options.workerId;
    const headers: Record<string, string> = { "X-AgentLightning-Client": "true" };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    this.http = ky.create({ prefixUrl: this.url, headers, timeout: options.timeoutMs ?? 10_000, retry: 0 });
  }

  /** One GET /task: a claimed task, or null when none is available. */
  async getTask(): Promise<LegacyTask | null> {
    const body = await this.send(
      "get",
      "task",
      this.workerId ? { searchParams: { worker_id: this.workerId } } : {},
    );
    const parsed = parseOrThrow(TaskIfAnySchema, body, "task response");
    return parsed.is_available ? (parsed.task ?? null) : null;
  }

  /** Poll until a task is available (or `signal` aborts, which rejects). */
  async pollNextTask(options: { signal?: AbortSignal } = {}): Promise<LegacyTask> {
    for (;;) {
      options.signal?.throwIfAborted();
      const task = await this.getTask();
      if (task) return task;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, this.pollIntervalMs);
        options.signal?.addEventListener(
          "abort",
          () => {
            clearTimeout(timer);
            reject(options.signal!.reason);
          },
          { once: true },
        );
      });
    }
  }

  /** The resources with this id, or null when the server has none by that id. */
  getResourcesById(resourcesId: string): Promise<ResourcesUpdate | null> {
    return this.resources(`resources/${encodeURIComponent(resourcesId)}`);
  }

  /** The latest resources, or null when none were published yet. */
  getLatestResources(): Promise<ResourcesUpdate | null> {
    return this.resources("resources/latest");
  }

  /** Report a task's result. */
  async postRollout(rollout: LegacyRollout): Promise<GenericResponse> {
    return parseOrThrow(
      GenericResponseSchema,
      await this.send("post", "rollout", { json: rollout }),
      "rollout response",
    );
  }

  private async resources(path: string): Promise<ResourcesUpdate | null> {
    try {
      return parseOrThrow(ResourcesUpdateSchema, await this.send("get", path, {}), "resources response");
    } catch (error) {
      if ((error as { status?: number }).status === 404) return null;
      throw error;
    }
  }

  private async send(
    method: "get" | "post",
    path: string,
    options: { json?: unknown; searchParams?: Record<string, string> },
  ): Promise<unknown> {
    try {
      return await this.http(path, { method, ...options }).json();
    } catch (error) {
      throw await toHttpError(error, method.toUpperCase(), `${this.url}/${path}`);
    }
  }
}
