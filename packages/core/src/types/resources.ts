import { z } from "zod";
import { InvalidArgumentError } from "../errors.js";
import { getLogger } from "../logger.js";
import { httpUrlProblem } from "../options.js";
import { storable } from "./input-rules.js";
import { parseOrThrow } from "./validate.js";

const SamplingParameters = z.record(z.string(), z.any()).default(() => ({}));

/**
 * The name of an environment variable holding the API key, read on the worker when the agent runs: the
 * key itself never enters the store. An agl extension: Python runners ignore it and read `api_key`.
 */
const ApiKeyEnv = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name")
  .optional();

export const LLMSchema = z.object({
  resource_type: z.literal("llm"),
  endpoint: z.string().min(1),
  model: z.string().min(1),
  api_key: z.string().nullable().default(null),
  api_key_env: ApiKeyEnv,
  sampling_parameters: SamplingParameters,
});
export type LLM = z.infer<typeof LLMSchema>;

export const ProxyLLMSchema = z.object({
  resource_type: z.literal("proxy_llm"),
  endpoint: z.string().min(1),
  model: z.string().min(1),
  api_key: z.string().nullable().default(null),
  api_key_env: ApiKeyEnv,
  sampling_parameters: SamplingParameters,
});
export type ProxyLLM = z.infer<typeof ProxyLLMSchema>;

export const PromptTemplateSchema = z.object({
  resource_type: z.literal("prompt_template"),
  template: z.string(),
  engine: z.enum(["jinja", "f-string", "poml"]).default("f-string"),
});
export type PromptTemplate = z.infer<typeof PromptTemplateSchema>;

export const ResourceSchema = z.discriminatedUnion("resource_type", [
  LLMSchema,
  ProxyLLMSchema,
  PromptTemplateSchema,
]);
export type Resource = z.infer<typeof ResourceSchema>;
export type ResourceInput = z.input<typeof ResourceSchema>;

export const NamedResourcesSchema = storable(z.record(z.string(), ResourceSchema));
export type NamedResources = z.infer<typeof NamedResourcesSchema>;

export const ResourcesUpdateSchema = z.object({
  resources_id: z.string().min(1),
  resources: NamedResourcesSchema,
  create_time: z.number(),
  update_time: z.number(),
  version: z.number().int().min(1),
});
export type ResourcesUpdate = z.infer<typeof ResourcesUpdateSchema>;

/**
 * Build a validated `llm` resource: `endpoint` must be an http(s) URL. Prefer `api_key_env` (the name of
 * an environment variable read on the worker) to `api_key`, which is stored in clear in the store.
 */
export function llm(fields: Omit<z.input<typeof LLMSchema>, "resource_type">): LLM {
  return checkLLMFields(parseOrThrow(LLMSchema, { ...fields, resource_type: "llm" }, "llm"), "llm");
}

/** Build a validated `proxy_llm` resource (same rules as {@link llm}). */
export function proxyLLM(fields: Omit<z.input<typeof ProxyLLMSchema>, "resource_type">): ProxyLLM {
  const resource = parseOrThrow(ProxyLLMSchema, { ...fields, resource_type: "proxy_llm" }, "proxy_llm");
  return checkLLMFields(resource, "proxy_llm");
}

let warnedLiteralKey = false;

function checkLLMFields<R extends LLM | ProxyLLM>(resource: R, what: string): R {
  const problem = httpUrlProblem(resource.endpoint, "endpoint");
  if (problem) throw new InvalidArgumentError(`${what}.endpoint`, problem);
  if (resource.api_key && !warnedLiteralKey) {
    warnedLiteralKey = true;
    getLogger().warn(
      `${what}(): a literal api_key is stored in the store in clear and served to every store client; pass api_key_env: "NAME_OF_ENV_VAR" to read it on the worker instead`,
    );
  }
  return resource;
}

/** Build a validated `prompt_template` resource. */
export function promptTemplate(
  template: string,
  engine: PromptTemplate["engine"] = "f-string",
): PromptTemplate {
  return parseOrThrow(
    PromptTemplateSchema,
    { resource_type: "prompt_template", template, engine },
    "prompt_template",
  );
}

/** An LLM of either kind (a ProxyLLM "is an" LLM, as in the reference). */
export function isLLM(resource: Resource): resource is LLM | ProxyLLM {
  return resource.resource_type === "llm" || resource.resource_type === "proxy_llm";
}

/**
 * The base URL a ProxyLLM resolves to for one attempt (Agent Lightning §1.3): strip one trailing
 * "/" and a trailing "/v1", append `/rollout/{rid}/attempt/{aid}`, re-append "/v1" if it was removed.
 * Both ids null → the endpoint unchanged; exactly one null → an error.
 */
export function proxyLLMBaseUrl(
  resource: Pick<ProxyLLM, "endpoint">,
  rolloutId: string | null | undefined,
  attemptId: string | null | undefined,
): string {
  const hasR = rolloutId != null;
  const hasA = attemptId != null;
  if (!hasR && !hasA) return resource.endpoint;
  if (hasR !== hasA) {
    throw new InvalidArgumentError(
      hasR ? "attempt_id" : "rollout_id",
      "rollout_id and attempt_id must be given together or not at all",
    );
  }
  let base = resource.endpoint;
  if (base.endsWith("/")) base = base.slice(0, -1);
  let hadV1 = false;
  if (base.endsWith("/v1")) {
    base = base.slice(0, -3);
    hadV1 = true;
  }
  base = `${base}/rollout/${rolloutId}/attempt/${attemptId}`;
  return hadV1 ? `${base}/v1` : base;
}

/**
 * Resolve a ProxyLLM to the plain LLM an agent uses during one attempt. Other resources pass through.
 * `apiKey` (e.g. a token scoped to this attempt) replaces the resource's own key when given.
 */
export function resolveForAttempt<R extends Resource>(
  resource: R,
  rolloutId: string,
  attemptId: string,
  options: { apiKey?: string } = {},
): R | LLM {
  if (resource.resource_type !== "proxy_llm") return resource;
  return {
    resource_type: "llm",
    endpoint: proxyLLMBaseUrl(resource, rolloutId, attemptId),
    model: resource.model,
    api_key: options.apiKey ?? resource.api_key,
    ...(resource.api_key_env === undefined ? {} : { api_key_env: resource.api_key_env }),
    sampling_parameters: { ...resource.sampling_parameters },
  };
}

/**
 * Format an f-string template: `{name}` placeholders, `{{`/`}}` escapes. A placeholder with no value
 * throws an InvalidArgumentError naming it.
 */
export function formatPromptTemplate(
  template: PromptTemplate | string,
  values: Record<string, unknown>,
): string {
  const text = typeof template === "string" ? template : template.template;
  if (typeof template !== "string" && template.engine !== "f-string") {
    throw new InvalidArgumentError(
      "engine",
      `only the f-string engine can be formatted, got ${template.engine}`,
    );
  }
  return text.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (match, name: string | undefined) => {
    if (match === "{{") return "{";
    if (match === "}}") return "}";
    const key = (name ?? "").trim();
    if (!(key in values)) {
      throw new InvalidArgumentError(
        key,
        `prompt template placeholder {${key}} has no value (given: ${Object.keys(values).join(", ") || "none"})`,
      );
    }
    const v = values[key];
    return typeof v === "string" ? v : JSON.stringify(v);
  });
}
