import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { jsonLinesLogger } from "../logging.js";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("jsonLinesLogger on stderr", () => {
  it("writes the lines of one event-loop turn in one write; errors flush at once", async () => {
    const writes: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: unknown) => {
      writes.push(String(chunk));
      return true;
    });
    const logger = jsonLinesLogger();
    for (let i = 0; i < 100; i++) logger.info("request", { i });
    expect(writes).toHaveLength(0);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toHaveLength(1);
    const lines = writes[0]!
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.i)).toEqual([...Array(100).keys()]);
    expect(lines[0]).toMatchObject({ level: "info", msg: "request" });
    logger.info("before");
    logger.error("boom", { detail: "x" });
    expect(writes).toHaveLength(2);
    expect(writes[1]).toMatch(/"msg":"before".*\n.*"msg":"boom"/s);
  });

  it("flushes on process exit", () => {
    const logging = fileURLToPath(new URL("../logging.ts", import.meta.url));
    const code = `import { jsonLinesLogger } from ${JSON.stringify(logging)};
      const l = jsonLinesLogger(); l.info("one"); l.warn("two"); process.exit(0);`;
    const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
      encoding: "utf8",
    });
    expect(run.status).toBe(0);
    const msgs = run.stderr
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).msg);
    expect(msgs).toEqual(["one", "two"]);
  });
});
