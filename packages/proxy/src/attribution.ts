import type { IncomingMessage } from "node:http";
import { AuthError, type Authenticator } from "./auth.js";
import type { AttributionStyle, Mode, RouteMatch } from "./routes.js";
import type { SessionRegistry } from "./sessions.js";

/** Who one LLM call belongs to. */
export interface Attribution {
  rolloutId: string;
  attemptId: string;
  style: AttributionStyle;
  mode: Mode | null;
  sessionId: string | null;
  /**
   * The attempt was named by the caller (path, headers, token) or by a bound session, as opposed to the
   * unbound session / trace-id fallback (rollout = the id, attempt "0").
   */
  explicit: boolean;
}

/** Resolves a call's attribution from its route, headers and credential. */
export class Attributor {
  /** Node lower-cases incoming header names, so the configured name must be looked up lower-cased. */
  private readonly traceHeader: string;

  constructor(
    traceHeader: string,
    private readonly auth: Authenticator,
    private readonly sessions: SessionRegistry,
  ) {
    this.traceHeader = traceHeader.toLowerCase();
  }

  /** Who the call belongs to (null: unattributed), checked against the caller's credential. */
  attribute(req: IncomingMessage, match: RouteMatch): Attribution | null {
    const principal = this.auth.llmPrincipal(req.headers);
    let a: Attribution | null = null;
    if (match.rolloutId && match.attemptId) {
      a = {
        rolloutId: match.rolloutId,
        attemptId: match.attemptId,
        style: match.style!,
        mode: match.mode ?? null,
        sessionId: null,
        explicit: true,
      };
    } else if (match.sessionId) {
      a = this.fromSession(match.sessionId, "session", match.sessionId);
    } else {
      const h = req.headers;
      const rid = h["x-rollout-id"];
      const aid = h["x-attempt-id"];
      const trace = h[this.traceHeader];
      if (typeof rid === "string" && typeof aid === "string" && rid && aid) {
        a = { rolloutId: rid, attemptId: aid, style: "header", mode: null, sessionId: null, explicit: true };
      } else if ((rid === undefined) !== (aid === undefined)) {
        throw new AuthError(400, "x-rollout-id and x-attempt-id must be given together");
      } else if (typeof trace === "string" && trace) {
        a = this.fromSession(trace, "trace_header", null);
      } else if (principal.kind === "attempt") {
        a = {
          rolloutId: principal.rolloutId,
          attemptId: principal.attemptId,
          style: "token",
          mode: null,
          sessionId: null,
          explicit: true,
        };
      }
    }
    if (
      principal.kind === "attempt" &&
      a &&
      (a.rolloutId !== principal.rolloutId || a.attemptId !== principal.attemptId)
    ) {
      throw new AuthError(403, "this token is scoped to another rollout attempt");
    }
    return a;
  }

  /**
   * A session (or trace id) bound to an attempt, else the fallback rollout = the id, attempt "0". A trace
   * id only names a session when one exists; a session route always does (it is auto-created on use).
   */
  private fromSession(id: string, style: AttributionStyle, routeSession: string | null): Attribution {
    const s = this.sessions.get(id);
    return {
      rolloutId: s?.rollout_id ?? id,
      attemptId: s?.attempt_id ?? "0",
      style,
      mode: null,
      sessionId: s ? id : routeSession,
      explicit: s !== undefined && (s.rollout_id !== id || s.attempt_id !== "0"),
    };
  }
}
