import { z } from "zod";

export const WorkerStatusSchema = z.enum(["idle", "busy", "unknown"]);
export type WorkerStatus = z.infer<typeof WorkerStatusSchema>;

export const WorkerSchema = z.object({
  worker_id: z.string().min(1),
  status: WorkerStatusSchema.default("unknown"),
  heartbeat_stats: z.record(z.string(), z.any()).nullable().default(null),
  last_heartbeat_time: z.number().nullable().default(null),
  last_dequeue_time: z.number().nullable().default(null),
  last_busy_time: z.number().nullable().default(null),
  last_idle_time: z.number().nullable().default(null),
  current_rollout_id: z.string().nullable().default(null),
  current_attempt_id: z.string().nullable().default(null),
});
export type Worker = z.infer<typeof WorkerSchema>;

export const TripletSchema = z.object({
  prompt: z.any(),
  response: z.any(),
  reward: z.number().nullable().default(null),
  metadata: z.record(z.string(), z.any()).default(() => ({})),
});
export type Triplet = z.infer<typeof TripletSchema>;

export interface PaginatedResult<T> {
  items: T[];
  /** -1 means all. */
  limit: number;
  offset: number;
  /** Matches before pagination. */
  total: number;
}

export const paginatedSchema = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    limit: z.number().int(),
    offset: z.number().int(),
    total: z.number().int(),
  });
