/**
 * The session API of verl PR #83 (`RemoteAgentLoop`): a session is a named conversation whose calls the
 * trainer reads back as turns. Here a session is also bound to a rollout attempt, so its calls become
 * spans like any other; the turns kept in memory are what the verl loop expects from GET.
 */
export interface SessionTurn {
  request_messages: unknown[];
  completion_text: string;
  completion_token_ids: number[];
  completion_logprobs: number[];
  finish_reason: string | null;
  tool_calls?: unknown[];
  /** Not in verl's record (it re-tokenizes); we have the engine's exact ids, so we give them. */
  prompt_token_ids?: number[];
}

export interface SessionRecord {
  session_id: string;
  rollout_id: string;
  attempt_id: string;
  turns: SessionTurn[];
  created_at: number;
  completed: boolean;
}

export class SessionRegistry {
  private readonly sessions = new Map<string, SessionRecord>();

  constructor(private readonly maxSessions = 100_000) {}

  /** Create or reset (verl re-registers on every agent retry to avoid double recording). */
  create(sessionId: string, binding: { rolloutId?: string; attemptId?: string } = {}): SessionRecord {
    if (!this.sessions.has(sessionId) && this.sessions.size >= this.maxSessions) {
      // the oldest session goes first; Map iteration order is insertion order
      const oldest = this.sessions.keys().next().value;
      if (oldest !== undefined) this.sessions.delete(oldest);
    }
    const record: SessionRecord = {
      session_id: sessionId,
      rollout_id: binding.rolloutId ?? sessionId,
      attempt_id: binding.attemptId ?? "0",
      turns: [],
      created_at: Date.now() / 1000,
      completed: false,
    };
    this.sessions.delete(sessionId);
    this.sessions.set(sessionId, record);
    return record;
  }

  get(sessionId: string): SessionRecord | undefined {
    return this.sessions.get(sessionId);
  }

  /** The session, auto-created on first use as in verl. */
  resolve(sessionId: string): SessionRecord {
    return this.sessions.get(sessionId) ?? this.create(sessionId);
  }

  complete(sessionId: string): SessionRecord | undefined {
    const s = this.sessions.get(sessionId);
    if (s) s.completed = true;
    return s;
  }

  delete(sessionId: string): boolean {
    return this.sessions.delete(sessionId);
  }

  get size(): number {
    return this.sessions.size;
  }
}

/** A turn from a finished chat call (choice 0, as verl records). */
export function turnFromCall(
  request: Record<string, any>,
  response: Record<string, any> | null,
): SessionTurn {
  const c0 = Array.isArray(response?.choices) ? response!.choices[0] : undefined;
  const message = c0?.message ?? {};
  const lp = Array.isArray(c0?.logprobs?.content)
    ? c0.logprobs.content.map((x: any) => x?.logprob)
    : Array.isArray(c0?.logprobs?.token_logprobs)
      ? c0.logprobs.token_logprobs
      : [];
  const turn: SessionTurn = {
    request_messages: Array.isArray(request.messages) ? request.messages : [],
    completion_text:
      typeof message.content === "string" ? message.content : typeof c0?.text === "string" ? c0.text : "",
    completion_token_ids: Array.isArray(c0?.token_ids) ? c0.token_ids : [],
    completion_logprobs: lp,
    finish_reason: c0?.finish_reason ?? null,
  };
  if (Array.isArray(message.tool_calls)) turn.tool_calls = message.tool_calls;
  const promptIds = response?.prompt_token_ids ?? c0?.prompt_token_ids;
  if (Array.isArray(promptIds)) turn.prompt_token_ids = promptIds;
  return turn;
}
