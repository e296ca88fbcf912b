import { AbortedError, IllegalTransitionError, NotFoundError } from "../errors.js";
import type { Logger } from "../logger.js";
import { isTerminalAttemptStatus, isTerminalRolloutStatus } from "../store/state-machine.js";
import type { LightningStore } from "../store/store.js";
import { nowSeconds } from "../types/ids.js";
import type { AttemptedRollout } from "../types/rollout.js";

/** Why the store (or the attempt's own deadline) ended an attempt while its agent was still running. */
export interface AttemptEnd {
  reason: string;
}

export interface AttemptWatch {
  /** Resolves when the attempt was ended from outside the agent; never rejects. */
  readonly ended: Promise<AttemptEnd>;
  stop(): void;
}

/**
 * Heartbeats one attempt and notices when it is over from the store's point of view: the attempt is
 * terminal (timed out by the watchdog, finished by someone else), its rollout was cancelled, finished
 * or queued again, or the attempt passed its deadline (`timeoutSeconds`, then marked `timeout` here
 * so the deadline bites even when no watchdog runs). The deadline timer keeps the process alive on
 * purpose: a worker must not exit while it holds an attempt.
 */
export function watchAttempt(options: {
  store: LightningStore;
  attempted: AttemptedRollout;
  heartbeatMs: number;
  timeoutSeconds: number | null;
  logger: Logger;
}): AttemptWatch {
  const { store, attempted, logger } = options;
  const rid = attempted.rollout_id;
  const aid = attempted.attempt.attempt_id;
  let stopped = false;
  let resolveEnded!: (end: AttemptEnd) => void;
  const ended = new Promise<AttemptEnd>((resolve) => (resolveEnded = resolve));
  const end = (reason: string) => {
    if (stopped) return;
    stop();
    resolveEnded({ reason });
  };

  const beat = async () => {
    try {
      const attempt = await store.updateAttempt(rid, aid, { last_heartbeat_time: nowSeconds() });
      if (isTerminalAttemptStatus(attempt.status))
        return end(`the store marked the attempt ${attempt.status}`);
      const rollout = await store.getRolloutById(rid);
      if (!rollout) return end("the rollout was deleted");
      if (isTerminalRolloutStatus(rollout.status)) return end(`the rollout is ${rollout.status}`);
      if (rollout.status === "queuing") return end("the rollout was queued again");
    } catch (error) {
      if (NotFoundError.isInstance(error)) return end("the attempt no longer exists");
      logger.debug(`heartbeat of attempt ${aid} failed`, error);
    }
  };
  const heartbeat = setInterval(() => void beat(), options.heartbeatMs);
  heartbeat.unref();

  let deadline: NodeJS.Timeout | undefined;
  if (options.timeoutSeconds != null) {
    const seconds = options.timeoutSeconds;
    deadline = setTimeout(async () => {
      try {
        await store.updateAttempt(rid, aid, { status: "timeout" });
      } catch (error) {
        if (!IllegalTransitionError.isInstance(error) && !NotFoundError.isInstance(error)) {
          logger.debug(`could not mark attempt ${aid} timed out`, error);
        }
      }
      end(`the attempt passed its ${seconds} s timeout`);
    }, seconds * 1000);
  }

  function stop() {
    stopped = true;
    clearInterval(heartbeat);
    clearTimeout(deadline);
  }
  return { ended, stop };
}

/** The error an agent's signal carries when its attempt was ended from outside. */
export function attemptEndedError(attempted: AttemptedRollout, end: AttemptEnd): AbortedError {
  return new AbortedError(
    `rollout ${attempted.rollout_id} attempt ${attempted.attempt.attempt_id} ended: ${end.reason}`,
  );
}
