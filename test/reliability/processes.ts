/** Store servers that can be SIGKILLed and restarted on the same port, and soak worker processes. */
import { type Child, spawnStoreServer, spawnTs } from "../store-http/processes.js";
import { freePort } from "../support/postgres.js";

/** An agl-store process on a fixed port, so clients reach its successor after a kill. */
export class RestartableStore {
  child: (Child & { url: string }) | null = null;
  restarts = 0;
  freezes = 0;
  private constructor(
    readonly db: string,
    readonly port: number,
  ) {}

  static async start(db: string): Promise<RestartableStore> {
    const store = new RestartableStore(db, await freePort());
    await store.spawn();
    return store;
  }

  get pid(): number {
    return this.child?.proc.pid ?? 0;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private async spawn(): Promise<void> {
    // The port was just released by the killed process: retry briefly if it is not free yet.
    for (let i = 0; ; i++) {
      try {
        this.child = await spawnStoreServer(["--db", this.db, "--port", String(this.port)]);
        return;
      } catch (error) {
        if (i >= 20) throw error;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** kill -9, then a new process on the same database and port. */
  async killAndRestart(downMs = 500): Promise<void> {
    await this.kill();
    await new Promise((r) => setTimeout(r, downMs));
    await this.spawn();
    this.restarts++;
  }

  /**
   * An outage that keeps the process and its memory: SIGSTOP, then SIGCONT after `ms`. The in-memory
   * backend loses everything on a kill, so its soak takes the store away this way instead; clients
   * time out and retry, heartbeats go unanswered, and the watchdog wakes to stale heartbeats.
   */
  async freeze(ms: number): Promise<void> {
    const proc = this.child?.proc;
    if (!proc) return;
    proc.kill("SIGSTOP");
    await new Promise((r) => setTimeout(r, ms));
    proc.kill("SIGCONT");
    this.freezes++;
  }

  async kill(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child) return;
    child.proc.kill("SIGKILL");
    await child.exited;
  }
}

export function spawnSoakWorker(storeUrl: string): Child {
  return spawnTs("test/reliability/soak-worker.ts", [storeUrl]);
}
