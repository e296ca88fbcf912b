import os from "node:os";
import { nowSeconds } from "../types/ids.js";

/** A small host snapshot for worker heartbeats (`heartbeat_stats`), like the reference's system_snapshot. */
export function systemSnapshot(): Record<string, unknown> {
  const memory = process.memoryUsage();
  const [load1, load5, load15] = os.loadavg();
  return {
    timestamp: nowSeconds(),
    host: os.hostname(),
    os: `${os.type()} ${os.release()}`,
    pid: process.pid,
    cpu_count: os.cpus().length,
    cpu_load_1m: load1,
    cpu_load_5m: load5,
    cpu_load_15m: load15,
    mem_total: os.totalmem(),
    mem_available: os.freemem(),
    mem_used_percent: os.totalmem() > 0 ? (1 - os.freemem() / os.totalmem()) * 100 : null,
    process_rss: memory.rss,
    process_heap_used: memory.heapUsed,
  };
}
