/**
 * The conversations behind `previous_response_id`, kept per rollout attempt: a response id only resolves
 * for calls attributed to the attempt that created it (unattributed calls share one scope), so one
 * attempt can never continue another's conversation. Bounded: the oldest entries go first.
 */
export class ResponseHistory {
  private readonly entries = new Map<string, unknown[]>();

  constructor(private readonly maxEntries = 10_000) {}

  private key(scope: string, responseId: string): string {
    return `${scope}\u0000${responseId}`;
  }

  /** The chat messages of the conversation up to and including that response, or undefined. */
  get(scope: string, responseId: string): unknown[] | undefined {
    return this.entries.get(this.key(scope, responseId));
  }

  put(scope: string, responseId: string, messages: unknown[]): void {
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(this.key(scope, responseId), messages);
  }

  get size(): number {
    return this.entries.size;
  }
}
