import { InvalidArgumentError } from "@agl/core";
import type { CausalLM } from "../model/causal-lm.js";
import { HttpError } from "./schemas.js";

/**
 * The model names one PolicyServer answers to, like vLLM's `--served-model-name` plus
 * `--lora-modules name=path`: the primary name serves the model as it is (its default adapter, if any),
 * and every LoRA adapter of a multi-adapter model is served under its own name over the same base
 * weights. A request's `model` picks the adapter its sequence runs with in the shared batch.
 */

export interface ServedModel {
  /** The name clients send as `model`. */
  name: string;
  /** The adapter its requests run with: a name, `null` = the base weights alone, `undefined` = the default. */
  adapter: string | null | undefined;
}

export class ServedModels {
  private readonly byName = new Map<string, ServedModel>();

  /**
   * `adapters`: served name → adapter name (`null`: the base alone). Default: every adapter the model
   * lists in `adapterNames` (except PEFT's "default", which the primary name serves) under its own name.
   */
  constructor(
    readonly primary: string,
    model: CausalLM,
    adapters?: Readonly<Record<string, string | null>>,
  ) {
    this.byName.set(primary, { name: primary, adapter: undefined });
    const available = model.adapterNames ?? [];
    const entries =
      adapters !== undefined
        ? Object.entries(adapters)
        : available.filter((a) => a !== "default").map((a) => [a, a] as [string, string]);
    for (const [name, adapter] of entries) {
      if (this.byName.has(name))
        throw new InvalidArgumentError(`adapters.${name}`, "is already a served name");
      if (adapter !== null && !available.includes(adapter)) {
        throw new InvalidArgumentError(
          `adapters.${name}`,
          `the model has no LoRA adapter "${adapter}" (it has: ${available.join(", ") || "none"})`,
        );
      }
      if (adapter === null && !model.adapterNames)
        throw new InvalidArgumentError(`adapters.${name}`, "this model cannot run rows without its adapters");
      this.byName.set(name, { name, adapter });
    }
  }

  /** Every served name, primary first. */
  list(): ServedModel[] {
    return [...this.byName.values()];
  }

  /** The served model a request names; unknown names are vLLM's 404 naming the `model` field. */
  resolve(name: string): ServedModel {
    const served = this.byName.get(name);
    if (served) return served;
    throw new HttpError(
      404,
      `The model \`${name}\` does not exist. This server serves: ${[...this.byName.keys()].join(", ")}`,
      "model",
      "model_not_found",
    );
  }
}
