/**
 * Parsing of the LLM routes and of every attribution style the gateway accepts (see README):
 *  - `/rollout/{rid}/attempt/{aid}[/v1]/{op}`                           Agent Lightning v0.x (ProxyLLM)
 *  - `/proxy/rollout/{rid}/attempt/{aid}/mode/{train|val}/openai/v1/{op}` Agent Lightning v1.0
 *  - `/{session}/v1/{op}` and `/v1/chat/completions/{session}`           verl PR #83 sessions
 *  - `[/v1]/{op}` plus headers `x-rollout-id`/`x-attempt-id` or a trace header (verl recipe 003)
 */

export type LLMOperation = "chat" | "completions" | "models" | "responses" | "messages";
export type AttributionStyle = "path" | "proxy_path" | "session" | "header" | "trace_header" | "token";
export type Mode = "train" | "val";

export interface RouteMatch {
  op: LLMOperation;
  rolloutId?: string;
  attemptId?: string;
  sessionId?: string;
  mode?: Mode;
  style?: AttributionStyle;
}

const RESERVED_FIRST_SEGMENTS = new Set(["v1", "rollout", "proxy", "sessions", "health", "healthz"]);

function opOf(segments: string[], from: number): LLMOperation | null {
  const rest = segments.length - from;
  if (rest === 1) {
    if (segments[from] === "completions") return "completions";
    if (segments[from] === "models") return "models";
    if (segments[from] === "responses") return "responses";
    if (segments[from] === "messages") return "messages";
    return null;
  }
  if (rest === 2 && segments[from] === "chat" && segments[from + 1] === "completions") return "chat";
  return null;
}

function decode(segment: string): string | null {
  if (segment === "") return null;
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** Match an LLM route; null when the path is not one (the control app handles the rest). */
export function matchLLMRoute(rawPath: string): RouteMatch | null {
  const q = rawPath.indexOf("?");
  const path = q === -1 ? rawPath : rawPath.slice(0, q);
  const segments = path.split("/");
  // segments[0] is "" (leading slash); a trailing slash yields one empty segment, drop it
  if (segments.length > 1 && segments[segments.length - 1] === "") segments.pop();
  const first = segments[1];

  if (first === "rollout" && segments[3] === "attempt") {
    const rolloutId = decode(segments[2] ?? "");
    const attemptId = decode(segments[4] ?? "");
    if (!rolloutId || !attemptId) return null;
    const op = opOf(segments, segments[5] === "v1" ? 6 : 5);
    return op ? { op, rolloutId, attemptId, style: "path" } : null;
  }

  if (first === "proxy" && segments[2] === "rollout" && segments[4] === "attempt") {
    if (segments[6] !== "mode" || segments[8] !== "openai" || segments[9] !== "v1") return null;
    const mode = segments[7];
    if (mode !== "train" && mode !== "val") return null;
    const rolloutId = decode(segments[3] ?? "");
    const attemptId = decode(segments[5] ?? "");
    if (!rolloutId || !attemptId) return null;
    const op = opOf(segments, 10);
    return op ? { op, rolloutId, attemptId, mode, style: "proxy_path" } : null;
  }

  if (first === "v1") {
    // `/v1/chat/completions/{session}` (verl PR #83's alternate form)
    if (segments.length === 5 && segments[2] === "chat" && segments[3] === "completions") {
      const sessionId = decode(segments[4]!);
      return sessionId ? { op: "chat", sessionId, style: "session" } : null;
    }
    const op = opOf(segments, 2);
    return op ? { op } : null;
  }

  const bareOp = opOf(segments, 1);
  if (bareOp) return { op: bareOp };

  if (first !== undefined && !RESERVED_FIRST_SEGMENTS.has(first) && segments[2] === "v1") {
    const sessionId = decode(first);
    const op = opOf(segments, 3);
    return sessionId && op ? { op, sessionId, style: "session" } : null;
  }
  return null;
}
