/**
 * The LISTEN connection of a PostgreSQL store: one per store serves every waiter of the process.
 * NOTIFY payloads (comma-separated rollout ids that became terminal, sent at COMMIT by any process)
 * wake the hub's waiters. When the connection drops, every waiter is woken to re-read (they poll
 * until it is back) and it reconnects with backoff.
 */
import pg from "pg";
import type { CompletionHub } from "../shared/waiters.js";

export class PgListener {
  private client: pg.Client | null = null;
  private stopped = false;

  constructor(
    private readonly url: string,
    readonly channel: string,
    private readonly hub: CompletionHub,
  ) {}

  /** True while notifications arrive (waiters may then skip polling). */
  get live(): boolean {
    return this.client !== null;
  }

  /** Connect and LISTEN; throws when the first connection fails. */
  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    let lost = false;
    const onLost = (reason: string) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = null;
      client.end().catch(() => {});
      if (this.stopped) return;
      console.error(`[agl-store] postgres LISTEN connection lost (${reason}); polling until it is back`);
      this.hub.notifyAll();
      this.scheduleRelisten(1);
    };
    client.on("error", (error) => onLost(error.message));
    client.on("end", () => onLost("connection ended"));
    client.on("notification", (msg) => {
      if (msg.payload) this.hub.notify(msg.payload.split(","));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
    } catch (error) {
      lost = true;
      client.end().catch(() => {});
      throw error;
    }
    if (this.stopped) {
      lost = true;
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    // Changes committed while no one listened are picked up by this re-read.
    this.hub.notifyAll();
  }

  private scheduleRelisten(attempt: number): void {
    const delay = Math.min(30_000, 250 * 2 ** Math.min(attempt, 7));
    setTimeout(() => {
      if (this.stopped || this.client) return;
      this.start().catch(() => this.scheduleRelisten(attempt + 1));
    }, delay).unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}
