// Test-only: compare the weights two runs saved, file by file.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** A digest of every weight file of a checkpoint folder. */
export function weightsDigest(dir: string, h = createHash("sha256")): string {
  for (const f of readdirSync(dir).sort()) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) weightsDigest(p, h);
    else if (f.endsWith(".bin")) h.update(readFileSync(p));
  }
  return h.copy().digest("hex");
}
