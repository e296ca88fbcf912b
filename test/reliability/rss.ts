/**
 * Resident memory of a server process under fuzz (Linux /proc), for the memory goal: peak RSS
 * at most 2x idle + 256 MiB during the run, back under 1.5x idle after it.
 */
import { readFileSync } from "node:fs";

export const MiB = 2 ** 20;

export function rssBytes(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/** Samples RSS every `intervalMs` until stopped; the peak is the largest sample. */
export function watchRss(pid: number, intervalMs = 50): { peak(): number; stop(): number } {
  let peak = rssBytes(pid);
  const timer = setInterval(() => {
    peak = Math.max(peak, rssBytes(pid));
  }, intervalMs);
  return {
    peak: () => peak,
    stop() {
      clearInterval(timer);
      peak = Math.max(peak, rssBytes(pid));
      return peak;
    },
  };
}

/**
 * RSS once it has settled under `below` bytes, or the lowest value seen within `timeoutMs`: after a burst
 * V8 hands pages back as its memory reducer runs, which takes a few idle seconds, not a fixed time.
 */
export async function settledRss(pid: number, below: number, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let lowest = rssBytes(pid);
  while (lowest >= below && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    lowest = Math.min(lowest, rssBytes(pid));
  }
  return lowest;
}
