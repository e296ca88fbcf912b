/**
 * The one error type of checkpoint loading and export. `code` says what went wrong; `file` and `tensor`
 * name where, so a user with a broken download knows which shard to fetch again.
 */

const PRETRAINED_ERROR = Symbol.for("agl.PretrainedCheckpointError");

export type PretrainedErrorCode =
  | "missing_file"
  | "invalid_json"
  | "invalid_config"
  | "unknown_model_type"
  | "unsupported_config"
  | "invalid_header"
  | "truncated"
  | "unsupported_dtype"
  | "missing_tensor"
  | "shape_mismatch"
  | "unexpected_tensor"
  | "invalid_adapter";

export class PretrainedCheckpointError extends Error {
  readonly [PRETRAINED_ERROR] = true;
  readonly code: PretrainedErrorCode;
  /** The file the problem is in (absolute or as given). */
  readonly file: string;
  /** The tensor concerned, when there is one. */
  readonly tensor: string | undefined;

  constructor(code: PretrainedErrorCode, file: string, message: string, tensor?: string) {
    super(`${file}${tensor ? ` [${tensor}]` : ""}: ${message}`);
    this.name = "PretrainedCheckpointError";
    this.code = code;
    this.file = file;
    this.tensor = tensor;
  }

  /** True for a PretrainedCheckpointError from any copy of this package. */
  static isInstance(error: unknown): error is PretrainedCheckpointError {
    return (
      typeof error === "object" &&
      error !== null &&
      (error as Record<symbol, unknown>)[PRETRAINED_ERROR] === true
    );
  }
}
