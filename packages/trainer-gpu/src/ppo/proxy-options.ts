import { z } from "zod";

/** Where the trainer's LLM proxy listens and what it tells agents (who may be on other machines). */
export interface PPOProxyOptions {
  /** Interface to bind (default "127.0.0.1"; "0.0.0.0" for workers on other machines). */
  host?: string;
  /** Port (default 0: a free one; fix it when `publicUrl` names it). */
  port?: number;
  /** Base URL workers reach the proxy at, published in the ProxyLLM (e.g. "http://trainer-1:8100"). */
  publicUrl?: string;
  /**
   * Secret of the per-attempt tokens (>= 16 chars). Default $AGL_PROXY_TOKEN_SECRET, else random per
   * run (then only in-process runners can mint tokens). Remote workers need the same secret
   * (`agl-worker --proxy-token-secret` or $AGL_PROXY_TOKEN_SECRET); it is never put in the store.
   */
  tokenSecret?: string;
}

// Validated by the PPO constructor, so a bad bind address or short secret fails before any run starts.
export const PPOProxyOptionsSchema = z.strictObject({
  host: z.string().min(1).optional(),
  port: z.number().int().min(0).max(65535).optional(),
  publicUrl: z
    .string()
    .url()
    .refine((u) => /^https?:\/\//.test(u), "must be an http(s) URL")
    .optional(),
  tokenSecret: z.string().min(16).optional(),
});
