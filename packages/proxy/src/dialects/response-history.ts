/**
 * The conversations behind `previous_response_id` and the output items behind `item_reference` inputs,
 * kept per rollout attempt: an id only resolves for calls attributed to the attempt that created it
 * (unattributed calls share one scope), so one attempt can never continue another's conversation.
 * Bounded: the oldest entries go first.
 */
export class ResponseHistory {
  private readonly entries = new Map<string, unknown[]>();
  private readonly items = new Map<string, unknown>();

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

  /** A stored output item (message or function call), for an `item_reference` input. */
  getItem(scope: string, itemId: string): unknown {
    return this.items.get(this.key(scope, itemId));
  }

  putItem(scope: string, itemId: string, item: unknown): void {
    if (this.items.size >= this.maxEntries * 4) {
      const oldest = this.items.keys().next().value;
      if (oldest !== undefined) this.items.delete(oldest);
    }
    this.items.set(this.key(scope, itemId), item);
  }

  get size(): number {
    return this.entries.size;
  }
}
