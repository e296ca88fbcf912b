import { describe, expect, it } from "vitest";
import { batchedLines } from "./log-wiring.js";

const turn = () => new Promise((r) => setImmediate(r));
const line = (level: number, msg: string) => `{"level":${level},"time":1,"pid":1,"msg":"${msg}"}\n`;

function sink() {
  const writes: string[] = [];
  return { writes, write: (chunk: string) => writes.push(chunk) };
}

describe("batchedLines (the CLIs' stderr log destination)", () => {
  it("writes the info lines of one event-loop turn in one write, after the turn", async () => {
    const s = sink();
    const out = batchedLines(s, { flushOnExit: false });
    for (let i = 0; i < 50; i++) out.write(line(30, `request ${i}`));
    expect(s.writes).toEqual([]);
    await turn();
    expect(s.writes).toHaveLength(1);
    expect(s.writes[0]!.split("\n").filter(Boolean)).toHaveLength(50);
    out.write(line(30, "next turn"));
    await turn();
    expect(s.writes).toHaveLength(2);
  });

  it("a warn or error line goes out at once, after the lines before it", () => {
    const s = sink();
    const out = batchedLines(s, { flushOnExit: false });
    out.write(line(30, "a"));
    out.write(line(40, "refused"));
    expect(s.writes).toEqual([line(30, "a") + line(40, "refused")]);
    out.write(line(50, "boom"));
    out.write(line(60, "fatal"));
    expect(s.writes.slice(1)).toEqual([line(50, "boom"), line(60, "fatal")]);
  });

  it("a burst is written every 64 KiB, and flush() empties the buffer", () => {
    const s = sink();
    const out = batchedLines(s, { flushOnExit: false });
    const big = line(30, "x".repeat(1000));
    for (let i = 0; i < 70; i++) out.write(big);
    expect(s.writes.length).toBe(1);
    expect(s.writes[0]!.length).toBeGreaterThan(64 * 1024);
    out.flush();
    expect(s.writes.join("")).toBe(big.repeat(70));
  });
});
