/** Store servers that can be SIGKILLed and restarted on the same port, and soak worker processes. */
import { type Child, spawnStoreServer, spawnTs } from "../store-http/processes.js";
import { freePort } from "../support/postgres.js";

/** An agl-store process on a fixed port, so clients reach its successor after a kill. */
export class RestartableStore {
  child: (Child & { url: string }) | null = null;
  restarts = 0;
  private constructor(
    readonly db: string,
    readonly port: number,
  ) {}

  static async start(db: string): Promise<RestartableStore> {
    const store = new RestartableStore(db, await freePort());
    await store.spawn();
    return store;
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

  async kill(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child) return;
    child.proc.kill("SIGKILL");
    await child.exited;
  }

  /** Resident memory of the server process in bytes (Linux /proc). */
  async rssBytes(): Promise<number> {
    const pid = this.child?.proc.pid;
    if (!pid) return 0;
    const status = (await import("node:fs")).readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
  }
}

export function spawnSoakWorker(storeUrl: string): Child {
  return spawnTs("test/reliability/soak-worker.ts", [storeUrl]);
}
