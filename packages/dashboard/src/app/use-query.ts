import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { UnauthorizedError } from "../view/api.js";

export interface QueryState<T> {
  data: T | undefined;
  error: Error | null;
  loading: boolean;
  reload: () => void;
}

type Listener = () => void;
const unauthorizedListeners = new Set<Listener>();

/** The app shows the login prompt when any request gets a 401. */
export function onUnauthorized(listener: Listener): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export function reportError(error: unknown): void {
  if (error instanceof UnauthorizedError) for (const l of unauthorizedListeners) l();
}

/**
 * Run `load` when `deps` change (and every `refreshMs` when given), keeping the last data while a
 * refresh runs so tables do not flicker. Answers of superseded runs are dropped.
 */
export function useQuery<T>(load: () => Promise<T>, deps: unknown[], refreshMs?: number): QueryState<T> {
  const [state, setState] = useState<{ data: T | undefined; error: Error | null; loading: boolean }>({
    data: undefined,
    error: null,
    loading: true,
  });
  const run = useRef(0);
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);

  useEffect(() => {
    const id = ++run.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => {
        if (id === run.current) setState({ data, error: null, loading: false });
      },
      (error: Error) => {
        if (id !== run.current) return;
        reportError(error);
        setState((s) => ({ data: s.data, error, loading: false }));
      },
    );
  }, [...deps, tick]);

  useEffect(() => {
    if (!refreshMs) return;
    const timer = setInterval(reload, refreshMs);
    return () => clearInterval(timer);
  }, [refreshMs, reload]);

  return { ...state, reload };
}
