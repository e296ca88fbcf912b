// Preloaded into a server process by bench/store-memory.ts (`node --expose-gc --require <this>`): on
// SIGUSR2 it runs two full garbage collections and appends the process's memory, before and after, as
// one JSON line to $AGL_MEMORY_PROBE_FILE. Heap still used after a full GC is live (a leak if it grows);
// resident memory beyond it is retained (pages the heap or malloc keeps but no object uses).
const { appendFileSync } = require("node:fs");

const file = process.env.AGL_MEMORY_PROBE_FILE;
if (file) {
  const snapshot = () => {
    const m = process.memoryUsage();
    return { rss: m.rss, heap_total: m.heapTotal, heap_used: m.heapUsed, external: m.external };
  };
  process.on("SIGUSR2", () => {
    const before = snapshot();
    if (typeof global.gc === "function") {
      global.gc();
      global.gc();
    }
    appendFileSync(file, `${JSON.stringify({ pid: process.pid, before, after: snapshot() })}\n`);
  });
}
