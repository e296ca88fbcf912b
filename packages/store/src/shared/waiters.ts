/**
 * waitForRollouts for durable stores: a waiter re-reads the database when this process changed one of
 * its rollouts (in-process notifications, shared by every store instance on the same database) or,
 * for changes made by other processes, when a database notification says so (PostgreSQL LISTEN, one
 * connection per process) or, without one, every `pollMs` at most. No high-frequency polling.
 */
import { AbortedError } from "@agl/core";

type Listener = () => void;

/** Notifications of rollouts that became terminal, keyed by rollout id. */
export class CompletionHub {
  private readonly byRollout = new Map<string, Set<Listener>>();
  private readonly any = new Set<Listener>();

  /** Call `listener` when any of `ids` is notified; returns the unsubscribe function. */
  subscribe(ids: Iterable<string>, listener: Listener): () => void {
    const list = [...ids];
    for (const id of list) {
      let set = this.byRollout.get(id);
      if (!set) this.byRollout.set(id, (set = new Set()));
      set.add(listener);
    }
    this.any.add(listener);
    return () => {
      this.any.delete(listener);
      for (const id of list) {
        const set = this.byRollout.get(id);
        set?.delete(listener);
        if (set && set.size === 0) this.byRollout.delete(id);
      }
    };
  }

  notify(ids: Iterable<string>): void {
    for (const id of ids) {
      const set = this.byRollout.get(id);
      if (set) for (const listener of [...set]) listener();
    }
  }

  /** Wake every waiter (used when the store closes). */
  notifyAll(): void {
    for (const listener of [...this.any]) listener();
  }
}

/** Hubs shared by store instances of one process that open the same database (keyed by its path/url). */
const sharedHubs = new Map<string, { hub: CompletionHub; users: number }>();

export function acquireHub(key: string): CompletionHub {
  let entry = sharedHubs.get(key);
  if (!entry) sharedHubs.set(key, (entry = { hub: new CompletionHub(), users: 0 }));
  entry.users++;
  return entry.hub;
}

export function releaseHub(key: string): void {
  const entry = sharedHubs.get(key);
  if (!entry) return;
  if (--entry.users <= 0) sharedHubs.delete(key);
}

/**
 * Wait until every id in `pending` is reported terminal by `check` or the timeout (seconds; null =
 * forever) passes. `check` returns the ids (of those asked) that are terminal now. Aborting `signal`
 * wakes the wait, which then rejects with AbortedError (at the latest once an in-flight `check` ends).
 */
export async function waitForTerminal(
  hub: CompletionHub,
  pending: readonly string[],
  timeoutSeconds: number | null,
  /** Longest sleep between re-reads; a function is asked before each sleep (it may change mid-wait). */
  pollMs: number | (() => number),
  check: (ids: string[]) => Promise<Set<string>>,
  isClosed: () => boolean,
  signal?: AbortSignal,
): Promise<void> {
  const left = new Set(pending);
  const deadline = timeoutSeconds === null ? Number.POSITIVE_INFINITY : Date.now() + timeoutSeconds * 1000;
  let wake: (() => void) | null = null;
  let signalled = false;
  const onEvent = () => {
    signalled = true;
    wake?.();
  };
  const unsubscribe = hub.subscribe(left, onEvent);
  signal?.addEventListener("abort", onEvent, { once: true });
  try {
    for (;;) {
      signalled = false;
      AbortedError.throwIfAborted(signal, "waitForRollouts");
      if (isClosed()) return;
      for (const id of await check([...left])) left.delete(id);
      AbortedError.throwIfAborted(signal, "waitForRollouts");
      if (left.size === 0 || isClosed()) return;
      const remaining = deadline - Date.now();
      if (remaining <= 0) return;
      if (signalled) continue;
      await new Promise<void>((resolve) => {
        const interval = typeof pollMs === "number" ? pollMs : pollMs();
        const timer = setTimeout(resolve, Math.min(interval, remaining));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  } finally {
    unsubscribe();
    signal?.removeEventListener("abort", onEvent);
  }
}
