import { open, rename } from "node:fs/promises";
import { endianness } from "node:os";
import { z } from "zod";
import { PretrainedCheckpointError } from "./errors.js";

/**
 * The safetensors format: an 8-byte little-endian header length, a JSON header
 * `{name: {dtype, shape, data_offsets: [begin, end]}, __metadata__?: {string: string}}` and the raw
 * little-endian tensor bytes (offsets relative to the end of the header). Small enough to read and write
 * here without native code. Tensors are read one at a time through a file handle, so a checkpoint never
 * has to fit into one Node buffer.
 */

export type SafetensorsDtype = "F64" | "F32" | "F16" | "BF16";

const BYTES: Record<SafetensorsDtype, number> = { F64: 8, F32: 4, F16: 2, BF16: 2 };

const LITTLE_ENDIAN = endianness() === "LE";

/** Header entries above this size are rejected (the format itself caps headers at 100 MB). */
const MAX_HEADER_BYTES = 100_000_000;

const EntrySchema = z.object({
  dtype: z.string(),
  shape: z.array(z.number().int().min(0)),
  data_offsets: z.tuple([z.number().int().min(0), z.number().int().min(0)]),
});

export interface SafetensorsEntry {
  name: string;
  dtype: string;
  shape: number[];
  /** Absolute byte range in the file. */
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  file: string;
  metadata: Record<string, string>;
  entries: Map<string, SafetensorsEntry>;
}

/** A float32 tensor read from (or to be written to) a safetensors file. */
export interface FloatTensor {
  shape: number[];
  data: Float32Array;
}

function fail(
  code: "invalid_header" | "truncated" | "unsupported_dtype",
  file: string,
  msg: string,
  t?: string,
) {
  return new PretrainedCheckpointError(code, file, msg, t);
}

/** Hex of the bytes, plus their text when it is printable (a JSON or HTML file saved under the wrong name). */
function describeBytes(bytes: Buffer): string {
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join(" ");
  const text = bytes.toString("latin1");
  return /^[\x20-\x7e\t\r\n]+$/.test(text) ? `${hex}, text ${JSON.stringify(text)}` : hex;
}

/** Read and validate the header of a safetensors file (offsets inside the file, sizes match shapes). */
export async function readSafetensorsHeader(file: string): Promise<SafetensorsHeader> {
  const fh = await openOrFail(file);
  try {
    const size = (await fh.stat()).size;
    if (size < 8)
      throw fail("truncated", file, `file has ${size} bytes, shorter than the 8-byte header length`);
    const lenBuf = Buffer.alloc(8);
    await fh.read(lenBuf, 0, 8, 0);
    // Compared as a bigint: garbage bytes read as a 64-bit length are far past what a double prints exactly.
    const rawLen = lenBuf.readBigUInt64LE(0);
    if (rawLen > BigInt(MAX_HEADER_BYTES) || rawLen < 2n) {
      throw fail(
        "invalid_header",
        file,
        `not a safetensors file: its first 8 bytes (${describeBytes(lenBuf)}) should be the little-endian length of the JSON header, which must be 2 to ${MAX_HEADER_BYTES} bytes`,
      );
    }
    const headerLen = Number(rawLen);
    if (8 + headerLen > size) {
      throw fail(
        "truncated",
        file,
        `header needs ${headerLen} bytes but the file has only ${size - 8} after the length`,
      );
    }
    const headerBuf = Buffer.alloc(headerLen);
    await fh.read(headerBuf, 0, headerLen, 8);
    let json: unknown;
    try {
      json = JSON.parse(headerBuf.toString("utf8"));
    } catch (error) {
      throw fail("invalid_header", file, `header is not valid JSON (${(error as Error).message})`);
    }
    if (typeof json !== "object" || json === null || Array.isArray(json)) {
      throw fail("invalid_header", file, "header is not a JSON object");
    }
    const dataStart = 8 + headerLen;
    const entries = new Map<string, SafetensorsEntry>();
    let metadata: Record<string, string> = {};
    for (const [name, raw] of Object.entries(json)) {
      if (name === "__metadata__") {
        metadata = z.record(z.string(), z.string()).catch({}).parse(raw);
        continue;
      }
      const parsed = EntrySchema.safeParse(raw);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const field = issue?.path.length ? `field ${issue.path.join(".")}` : "entry";
        throw fail("invalid_header", file, `malformed header entry: ${field}: ${issue?.message}`, name);
      }
      const { dtype, shape, data_offsets } = parsed.data;
      const [b, e] = data_offsets;
      const count = shape.reduce((a, x) => a * x, 1);
      const width = BYTES[dtype as SafetensorsDtype];
      if (width !== undefined && e - b !== count * width) {
        throw fail(
          "invalid_header",
          file,
          `${dtype}${JSON.stringify(shape)} needs ${count * width} bytes, offsets give ${e - b}`,
          name,
        );
      }
      if (e < b) throw fail("invalid_header", file, "data_offsets end before they begin", name);
      if (dataStart + e > size) {
        throw fail(
          "truncated",
          file,
          `tensor data ends at byte ${dataStart + e} but the file has ${size} bytes`,
          name,
        );
      }
      entries.set(name, { name, dtype, shape, begin: dataStart + b, end: dataStart + e });
    }
    return { file, metadata, entries };
  } finally {
    await fh.close();
  }
}

async function openOrFail(file: string, flags = "r") {
  try {
    return await open(file, flags);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      throw new PretrainedCheckpointError("missing_file", file, "file not found");
    }
    throw error;
  }
}

/** Decode raw little-endian bytes of a float dtype to float32. */
export function decodeFloats(bytes: Uint8Array, dtype: string, file: string, tensor: string): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dtype === "F32") {
    const out = new Float32Array(bytes.byteLength / 4);
    if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(bytes);
    else for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
    return out;
  }
  if (dtype === "BF16") {
    // bfloat16 is the top half of a float32.
    const out = new Float32Array(bytes.byteLength / 2);
    const u32 = new Uint32Array(out.buffer);
    if (LITTLE_ENDIAN && bytes.byteOffset % 2 === 0) {
      const u16 = new Uint16Array(bytes.buffer, bytes.byteOffset, out.length);
      for (let i = 0; i < out.length; i++) u32[i] = (u16[i] as number) << 16;
    } else for (let i = 0; i < out.length; i++) u32[i] = view.getUint16(i * 2, true) << 16;
    return out;
  }
  if (dtype === "F16") {
    const out = new Float32Array(bytes.byteLength / 2);
    for (let i = 0; i < out.length; i++) out[i] = halfToFloat(view.getUint16(i * 2, true));
    return out;
  }
  if (dtype === "F64") {
    const out = new Float32Array(bytes.byteLength / 8);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat64(i * 8, true);
    return out;
  }
  throw fail(
    "unsupported_dtype",
    file,
    `dtype ${dtype} is not a float type this loader converts (F32, F16, BF16, F64)`,
    tensor,
  );
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 31) return frac ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

/** float32 bits -> bfloat16 bits, round to nearest even (NaN stays NaN). */
function bf16FromBits(u: number): number {
  if ((u & 0x7f800000) === 0x7f800000 && u & 0x7fffff) return (u >>> 16) | 0x40;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/** float32 -> bfloat16 bits, round to nearest even (NaN stays NaN). */
export function floatToBf16Bits(x: number): number {
  return bf16FromBits(new Uint32Array(new Float32Array([x]).buffer)[0] as number);
}

/**
 * Read the named tensors (default: all) of one file as float32. Each tensor is read on its own, so peak
 * memory is the decoded tensors plus one raw tensor.
 */
export async function readSafetensors(
  file: string,
  names?: readonly string[],
): Promise<Map<string, FloatTensor>> {
  const header = await readSafetensorsHeader(file);
  const out = new Map<string, FloatTensor>();
  const fh = await openOrFail(file);
  try {
    for (const name of names ?? [...header.entries.keys()]) {
      const e = header.entries.get(name);
      if (!e) throw new PretrainedCheckpointError("missing_tensor", file, "tensor not in this file", name);
      const raw = Buffer.alloc(e.end - e.begin);
      if (raw.length > 0) await fh.read(raw, 0, raw.length, e.begin);
      out.set(name, { shape: e.shape, data: decodeFloats(raw, e.dtype, file, name) });
    }
  } finally {
    await fh.close();
  }
  return out;
}

export interface WriteSafetensorsOptions {
  /** Stored dtype (default F32). */
  dtype?: "F32" | "BF16";
  /** `__metadata__`; transformers requires `format: "pt"`, which is always set. */
  metadata?: Record<string, string>;
}

function encode(t: FloatTensor, dtype: "F32" | "BF16"): Buffer {
  if (dtype === "F32") {
    if (LITTLE_ENDIAN) return Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    const b = Buffer.alloc(t.data.length * 4);
    for (let i = 0; i < t.data.length; i++) b.writeFloatLE(t.data[i] as number, i * 4);
    return b;
  }
  const bits = new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length);
  const b = Buffer.alloc(t.data.length * 2);
  for (let i = 0; i < bits.length; i++) b.writeUInt16LE(bf16FromBits(bits[i] as number), i * 2);
  return b;
}

/** Bytes a tensor takes in a file of the given dtype. */
export function storedBytes(t: FloatTensor, dtype: "F32" | "BF16" = "F32"): number {
  return t.data.length * (dtype === "F32" ? 4 : 2);
}

/**
 * Write tensors to a safetensors file (to a temporary name, then renamed). The header is padded with
 * spaces to a multiple of 8 bytes, as the reference writer does, so tensor data stays aligned.
 */
export async function writeSafetensors(
  file: string,
  tensors: ReadonlyMap<string, FloatTensor>,
  options: WriteSafetensorsOptions = {},
): Promise<void> {
  const dtype = options.dtype ?? "F32";
  const header: Record<string, unknown> = { __metadata__: { ...options.metadata, format: "pt" } };
  let offset = 0;
  for (const [name, t] of tensors) {
    const n = t.shape.reduce((a, x) => a * x, 1);
    if (n !== t.data.length)
      throw new Error(`tensor ${name}: shape [${t.shape}] does not match ${t.data.length} values`);
    const bytes = storedBytes(t, dtype);
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const headerBuf = Buffer.from(json, "utf8");
  const lenBuf = Buffer.alloc(8);
  lenBuf.writeBigUInt64LE(BigInt(headerBuf.length));
  const tmp = `${file}.tmp-${process.pid}`;
  const fh = await open(tmp, "w");
  try {
    await fh.write(lenBuf);
    await fh.write(headerBuf);
    for (const t of tensors.values()) await fh.write(encode(t, dtype));
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
}
