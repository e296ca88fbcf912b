import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import cliProgress from "cli-progress";
import { lineChartSvg } from "./plot.js";

export type StepMetrics = Record<string, number>;

export interface MetricsRecord {
  step: number;
  metrics: StepMetrics;
}

export interface MetricsLogOptions {
  /** JSONL file (one `{step, ...metrics}` per line); null to skip. */
  jsonlPath: string | null;
  /** SVG plot of training and validation reward; null to skip. */
  plotPath: string | null;
  /** Live progress bar on stderr (only drawn on a TTY). */
  progress: boolean;
  /** One summary line per step on stdout. */
  console: boolean;
  totalSteps: number;
  title: string;
}

const SUMMARY_KEYS: Array<[string, string]> = [
  ["training/reward", "reward"],
  ["training/accuracy", "acc"],
  ["val/reward", "val"],
  ["val/accuracy", "val_acc"],
  ["actor/entropy", "ent"],
  ["actor/ppo_kl", "kl"],
  ["actor/pg_clipfrac", "clip"],
  ["actor/grad_norm", "gnorm"],
  ["perf/throughput", "tok/s"],
  ["timing_s/step", "s"],
];

function fmt(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e4 || a < 1e-3) ? v.toExponential(2) : Number(v.toFixed(4)).toString();
}

/** Per-step metrics to JSONL, the console (a line per step plus a live bar) and an SVG plot. */
export class MetricsLog {
  readonly history: MetricsRecord[] = [];
  private readonly bar: cliProgress.SingleBar | null;

  constructor(private readonly o: MetricsLogOptions) {
    for (const p of [o.jsonlPath, o.plotPath]) if (p) mkdirSync(dirname(p), { recursive: true });
    this.bar =
      o.progress && process.stderr.isTTY
        ? new cliProgress.SingleBar(
            {
              format: "PPO |{bar}| step {value}/{total} | reward {reward} | val {val} | {eta_formatted} left",
              hideCursor: true,
              stream: process.stderr,
              clearOnComplete: false,
            },
            cliProgress.Presets.shades_classic,
          )
        : null;
  }

  /** Start (or, after a resume, continue) the live bar at `step`, replaying earlier records. */
  start(step: number, previous: readonly MetricsRecord[] = []): void {
    this.history.push(...previous);
    this.bar?.start(this.o.totalSteps, step, { reward: "-", val: "-" });
  }

  record(step: number, metrics: StepMetrics): void {
    const existing = this.history.find((r) => r.step === step);
    if (existing) Object.assign(existing.metrics, metrics);
    else this.history.push({ step, metrics: { ...metrics } });
    if (this.o.jsonlPath) appendFileSync(this.o.jsonlPath, `${JSON.stringify({ step, ...metrics })}\n`);
    const last = (key: string) => {
      for (let i = this.history.length - 1; i >= 0; i--) {
        const v = this.history[i]!.metrics[key];
        if (v !== undefined) return fmt(v);
      }
      return "-";
    };
    this.bar?.update(step, { reward: last("training/reward"), val: last("val/reward") });
    if (this.o.console) {
      const parts = SUMMARY_KEYS.filter(([k]) => metrics[k] !== undefined).map(
        ([k, short]) => `${short}=${fmt(metrics[k]!)}`,
      );
      const line = `[ppo] step ${step}/${this.o.totalSteps} ${parts.join(" ")}`;
      if (this.bar) this.bar.render();
      process.stdout.write(`${line}\n`);
    }
    this.writePlot();
  }

  series(key: string): Array<[number, number]> {
    return this.history.filter((r) => r.metrics[key] !== undefined).map((r) => [r.step, r.metrics[key]!]);
  }

  writePlot(): void {
    if (!this.o.plotPath) return;
    const svg = lineChartSvg(this.o.title, [
      { name: "training reward", color: "#1f77b4", points: this.series("training/reward") },
      { name: "validation reward", color: "#d62728", points: this.series("val/reward") },
    ]);
    writeFileSync(this.o.plotPath, svg);
  }

  stop(): void {
    this.bar?.stop();
  }
}
