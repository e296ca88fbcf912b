/** A FIFO queue of rollout ids with O(1) amortised push/shift and membership, as the reference's deque. */
export class RolloutQueue {
  private items: string[] = [];
  private head = 0;
  private readonly members = new Set<string>();

  get length(): number {
    return this.items.length - this.head;
  }

  has(id: string): boolean {
    return this.members.has(id);
  }

  /** Append unless already queued (the reference re-enqueues only rollouts not in the queue). */
  push(id: string): void {
    if (this.members.has(id)) return;
    this.members.add(id);
    this.items.push(id);
  }

  shift(): string | undefined {
    if (this.head >= this.items.length) return undefined;
    const id = this.items[this.head++]!;
    this.members.delete(id);
    // Compact once the consumed prefix dominates, keeping shift O(1) amortised.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return id;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
    this.members.clear();
  }
}
