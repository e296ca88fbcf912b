import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decodeFloats,
  floatToBf16Bits,
  readSafetensors,
  readSafetensorsHeader,
  writeSafetensors,
} from "./safetensors.js";

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "agl-st-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const bytesOf = (words: number[]) => {
  const b = Buffer.alloc(words.length * 2);
  words.forEach((w, i) => {
    b.writeUInt16LE(w, i * 2);
  });
  return b;
};

describe("safetensors", () => {
  it("decodes f16 and bf16 exactly (normal, subnormal, signed zero, infinity)", () => {
    const f16 = decodeFloats(
      bytesOf([0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000, 0x7c00, 0x3555]),
      "F16",
      "f",
      "t",
    );
    expect(Array.from(f16)).toEqual([
      1,
      -2,
      2 ** -24,
      65504,
      -0,
      Number.POSITIVE_INFINITY,
      Math.fround(0.333251953125),
    ]);
    const bf16 = decodeFloats(bytesOf([0x3f80, 0xc0a0, 0x3eab, 0x0000]), "BF16", "f", "t");
    expect(Array.from(bf16)).toEqual([1, -5, Math.fround(0.333984375), 0]);
  });

  it("rounds float32 to bfloat16 to nearest, ties to even", () => {
    expect(floatToBf16Bits(1)).toBe(0x3f80);
    // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties to the even mantissa (1).
    expect(floatToBf16Bits(1 + 2 ** -8)).toBe(0x3f80);
    expect(floatToBf16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82);
    expect(floatToBf16Bits(Number.NaN) & 0x7fc0).toBe(0x7fc0);
  });

  it("write -> read round trips f32 exactly and bf16 within half an ulp, with an 8-byte aligned header", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 7 })), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.integer(),
        async (shapes, seed) => {
          let s = seed;
          const next = () => {
            s = (s * 1103515245 + 12345) & 0x7fffffff;
            return (s / 0x7fffffff - 0.5) * 20;
          };
          const tensors = new Map(
            shapes.map(([r, c], i) => [
              `t${i}.weight`,
              { shape: [r, c], data: Float32Array.from({ length: r * c }, next) },
            ]),
          );
          const f32 = join(root, "a.safetensors");
          await writeSafetensors(f32, tensors, { metadata: { note: "x" } });
          const raw = await readFile(f32);
          expect(Number(raw.readBigUInt64LE(0)) % 8).toBe(0);
          const header = await readSafetensorsHeader(f32);
          expect(header.metadata).toEqual({ note: "x", format: "pt" });
          const back = await readSafetensors(f32);
          for (const [k, t] of tensors) expect(back.get(k)).toEqual(t);
          const bf = join(root, "b.safetensors");
          await writeSafetensors(bf, tensors, { dtype: "BF16" });
          for (const [k, t] of await readSafetensors(bf)) {
            const orig = tensors.get(k)!.data;
            t.data.forEach((x, i) => {
              expect(Math.abs(x - (orig[i] as number))).toBeLessThanOrEqual(
                Math.abs(orig[i] as number) * 2 ** -8,
              );
            });
          }
        },
      ),
      { numRuns: 25 },
    );
  });
});
