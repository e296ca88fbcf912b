import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Tokenizer as HfJsTokenizer } from "@huggingface/tokenizers";
import { z } from "zod";
import { PretrainedCheckpointError, type PretrainedErrorCode } from "../pretrained/errors.js";
import type { EncodeOptions, TextTokenizer } from "./text-tokenizer.js";

/**
 * A checkpoint's own tokenizer: `tokenizer.json` (byte-level BPE, added and special tokens) run by
 * `@huggingface/tokenizers`, the pure-JS port of the Hugging Face tokenizers library, with the special
 * tokens of `tokenizer_config.json` and the eos ids of `generation_config.json`.
 *
 * `encode` treats added-token strings in text as those tokens (as `transformers` does; a rendered chat
 * template relies on it) and, like `transformers`' `encode`, runs the tokenizer.json post-processor by
 * default (`addSpecialTokens: true`: e.g. Llama-3's `TemplateProcessing` puts `<|begin_of_text|>` first;
 * Qwen's adds nothing). Chat templates encode with `addSpecialTokens: false` (the template writes its own
 * bos), as `apply_chat_template` does. Generation stops on every eos id: `generation_config.json`'s
 * `eos_token_id` (a number or a list) together with the tokenizer's `eos_token`.
 */

/** A special token in tokenizer_config.json: a plain string or an AddedToken object. */
const TokenField = z.union([z.string(), z.object({ content: z.string() }).loose()]).nullish();

export const HfTokenizerConfigSchema = z
  .object({
    bos_token: TokenField,
    eos_token: TokenField,
    unk_token: TokenField,
    pad_token: TokenField,
    sep_token: TokenField,
    cls_token: TokenField,
    mask_token: TokenField,
    additional_special_tokens: z.array(TokenField).nullish(),
    chat_template: z
      .union([z.string(), z.array(z.object({ name: z.string(), template: z.string() }))])
      .nullish(),
  })
  .loose();
export type HfTokenizerConfig = z.infer<typeof HfTokenizerConfigSchema>;

const GenerationConfigSchema = z
  .object({ eos_token_id: z.union([z.number().int(), z.array(z.number().int())]).nullish() })
  .loose();

const TokenizerJsonSchema = z
  .object({
    model: z.object({ type: z.string() }).loose(),
    added_tokens: z
      .array(z.object({ id: z.number().int(), content: z.string(), special: z.boolean() }).loose())
      .optional(),
    decoder: z.unknown().optional(),
  })
  .loose();

/**
 * What the tokenizers library accepts silently but encodes nothing with: a model without a vocabulary
 * (an empty BPE/WordPiece/WordLevel `vocab`, an empty Unigram list) turns every text into `[]`.
 */
function checkModel(model: { type: string } & Record<string, unknown>, source: string): void {
  const vocab = model.vocab;
  if (vocab === undefined)
    fail("invalid_config", source, "tokenizer.json", `field model.vocab: missing (model type ${model.type})`);
  const size = Array.isArray(vocab)
    ? vocab.length
    : typeof vocab === "object" && vocab !== null
      ? Object.keys(vocab).length
      : -1;
  if (size < 0)
    fail(
      "invalid_config",
      source,
      "tokenizer.json",
      `field model.vocab: expected an object or a list, got ${typeof vocab}`,
    );
  if (size === 0)
    fail(
      "invalid_config",
      source,
      "tokenizer.json",
      `field model.vocab: the ${model.type} vocabulary is empty`,
    );
  if (model.type === "BPE" && model.merges !== undefined && !Array.isArray(model.merges)) {
    fail("invalid_config", source, "tokenizer.json", "field model.merges: expected a list");
  }
}

export type SpecialTokenName =
  | "bos_token"
  | "eos_token"
  | "unk_token"
  | "pad_token"
  | "sep_token"
  | "cls_token"
  | "mask_token";
const SPECIAL_NAMES: SpecialTokenName[] = [
  "bos_token",
  "eos_token",
  "unk_token",
  "pad_token",
  "sep_token",
  "cls_token",
  "mask_token",
];

export interface HfTokenizerFiles {
  /** Parsed tokenizer.json. */
  tokenizerJson: unknown;
  /** Parsed tokenizer_config.json. */
  tokenizerConfig: unknown;
  /** Parsed generation_config.json, when the checkpoint has one. */
  generationConfig?: unknown;
  /** Where the files came from (named in errors). */
  source?: string;
}

function tokenContent(field: z.infer<typeof TokenField>): string | null {
  if (field == null) return null;
  return typeof field === "string" ? field : field.content;
}

/** A PretrainedCheckpointError naming `file` inside the checkpoint folder `source`. */
function fail(code: PretrainedErrorCode, source: string, file: string, message: string): never {
  throw new PretrainedCheckpointError(code, join(source, file), message);
}

async function readJson(dir: string, file: string, required: boolean): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(join(dir, file), "utf8");
  } catch (error) {
    if (!required && (error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    return fail("missing_file", dir, file, `cannot read: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    return fail("invalid_json", dir, file, `not valid JSON (${(error as Error).message})`);
  }
}

export class HfTokenizer implements TextTokenizer {
  readonly vocabSize: number;
  readonly eosIds: readonly number[];
  readonly padId: number;
  readonly config: HfTokenizerConfig;
  /** Special token strings by attribute (`eos_token` → `<|im_end|>`), as chat templates receive them. */
  readonly specialTokens: Partial<Record<SpecialTokenName, string>>;
  readonly additionalSpecialTokens: string[];
  /** Whether the decoder maps bytes to printable characters (GPT-2 style byte-level BPE). */
  readonly byteLevel: boolean;
  /** The files it was built from (a worker thread rebuilds the same tokenizer from them). */
  readonly files: HfTokenizerFiles;
  private readonly tok: HfJsTokenizer;
  private readonly addedTokens = new Map<number, { content: string; special: boolean }>();
  private readonly idToToken: (id: number) => string | undefined;

  constructor(files: HfTokenizerFiles) {
    this.files = files;
    const source = files.source ?? "<memory>";
    const json = TokenizerJsonSchema.safeParse(files.tokenizerJson);
    if (!json.success) {
      const issue = json.error.issues[0];
      fail(
        "invalid_config",
        source,
        "tokenizer.json",
        `field ${issue?.path.join(".") || "(root)"}: ${issue?.message}`,
      );
    }
    checkModel(json.data.model, source);
    const cfg = HfTokenizerConfigSchema.safeParse(files.tokenizerConfig ?? {});
    if (!cfg.success) {
      const issue = cfg.error.issues[0];
      fail(
        "invalid_config",
        source,
        "tokenizer_config.json",
        `field ${issue?.path.join(".") || "(root)"}: ${issue?.message}`,
      );
    }
    const gen = GenerationConfigSchema.safeParse(files.generationConfig ?? {});
    if (!gen.success) {
      fail(
        "invalid_config",
        source,
        "generation_config.json",
        `field eos_token_id: ${gen.error.issues[0]?.message}`,
      );
    }
    this.config = cfg.data;
    try {
      this.tok = new HfJsTokenizer(files.tokenizerJson as object, cfg.data);
    } catch (error) {
      fail("invalid_config", source, "tokenizer.json", `cannot be loaded: ${(error as Error).message}`);
    }
    for (const t of json.data.added_tokens ?? []) this.addedTokens.set(t.id, t);
    const vocab = this.tok.get_vocab(true);
    let maxId = -1;
    for (const id of vocab.values()) if (id > maxId) maxId = id;
    this.vocabSize = maxId + 1;
    this.idToToken = (id) => this.tok.id_to_token(id);
    this.byteLevel = JSON.stringify(json.data.decoder ?? null).includes('"ByteLevel"');

    const specials: Partial<Record<SpecialTokenName, string>> = {};
    for (const name of SPECIAL_NAMES) {
      const content = tokenContent(cfg.data[name]);
      if (content !== null) specials[name] = content;
    }
    this.specialTokens = specials;
    this.additionalSpecialTokens = (cfg.data.additional_special_tokens ?? [])
      .map(tokenContent)
      .filter((t): t is string => t !== null);

    const eos = new Set<number>();
    const genEos = gen.data.eos_token_id;
    for (const id of genEos == null ? [] : Array.isArray(genEos) ? genEos : [genEos]) eos.add(id);
    if (specials.eos_token !== undefined) {
      const id = this.tok.token_to_id(specials.eos_token);
      if (id === undefined) {
        fail(
          "invalid_config",
          source,
          "tokenizer_config.json",
          `eos_token "${specials.eos_token}" is not in the vocabulary`,
        );
      }
      eos.add(id);
    }
    if (eos.size === 0) {
      fail(
        "invalid_config",
        source,
        "tokenizer_config.json",
        "no eos token: set eos_token here or eos_token_id in generation_config.json",
      );
    }
    this.eosIds = [...eos];
    const pad = specials.pad_token === undefined ? undefined : this.tok.token_to_id(specials.pad_token);
    this.padId = pad ?? (this.eosIds[0] as number);
  }

  /** Load tokenizer.json, tokenizer_config.json and (optional) generation_config.json from a checkpoint folder. */
  static async fromDir(dir: string): Promise<HfTokenizer> {
    const tokenizerJson = await readJson(dir, "tokenizer.json", true);
    const tokenizerConfig = await readJson(dir, "tokenizer_config.json", true);
    const generationConfig = await readJson(dir, "generation_config.json", false);
    return new HfTokenizer({ tokenizerJson, tokenizerConfig, generationConfig, source: dir });
  }

  /** Text to ids; `addSpecialTokens` (default true, as transformers) runs the post-processor (bos etc.). */
  encode(text: string, options: EncodeOptions = {}): number[] {
    return this.tok.encode(text, { add_special_tokens: options.addSpecialTokens ?? true }).ids;
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    // Ids past the tokenizer's vocabulary (a model's padded embedding rows) have no text.
    const known = ids.filter((id) => id >= 0 && id < this.vocabSize && this.idToToken(id) !== undefined);
    if (known.length === 0) return "";
    return this.tok.decode(known, { skip_special_tokens: options.skipSpecialTokens ?? false });
  }

  tokenText(id: number): string {
    return this.decode([id]);
  }

  tokenToId(token: string): number | undefined {
    return this.tok.token_to_id(token);
  }

  /** The raw token string (`Ġhello` in byte-level vocabularies). */
  idToTokenString(id: number): string | undefined {
    return this.idToToken(id);
  }

  /** The added token with this id (its literal content and whether it is special), if any. */
  addedToken(id: number): { content: string; special: boolean } | undefined {
    return this.addedTokens.get(id);
  }
}
