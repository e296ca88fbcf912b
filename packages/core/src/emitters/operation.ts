import { type Span as OtelSpan, SpanStatusCode } from "@opentelemetry/api";
import { InvalidArgumentError } from "../errors.js";
import { currentFrame } from "../tracing/context.js";
import { ATTR, SPAN_NAMES } from "../tracing/conventions.js";
import { flattenAttributes } from "../tracing/flatten.js";
import { defaultTracer, LightningTracer } from "../tracing/tracer.js";

/** Lets the body of a block-form operation record its input and output. */
export interface OperationHandle {
  readonly span: OtelSpan;
  /** Record `agentlightning.operation.input.<key>` (nested values flattened, non-primitive leaves as JSON). */
  setInput(values: Record<string, unknown>): void;
  /** Record `agentlightning.operation.output[.<path>]`. */
  setOutput(value: unknown): void;
  setAttributes(values: Record<string, unknown>): void;
}

export interface OperationOptions {
  /** `agentlightning.operation.name`; default the function's name. */
  name?: string;
  /** Input recorded when the span starts (block form). */
  input?: Record<string, unknown>;
  tracer?: LightningTracer;
}

type AnyFn = (...args: any[]) => any;

interface MethodDecoratorContext {
  kind: "method";
  name: string | symbol;
}

/**
 * An `agentlightning.operation` span around some work, in three forms:
 * - wrapper: `const f = operation(async function search(query) {...})`: each call is a span with
 *   `.input.<param>` (or `.input.args.<i>` when parameter names cannot be read) and `.output`;
 * - block: `await operation("search", async (op) => { op.setInput({q}); ... })` returns the body's result;
 * - TC39 method decorator: `@operation search(query) {...}`.
 * A thrown error (or rejected promise) sets status ERROR, records the exception and is rethrown.
 */
export function operation<F extends AnyFn>(fn: F, options?: OperationOptions): F;
export function operation<F extends AnyFn>(method: F, context: MethodDecoratorContext): F;
export function operation<T>(name: string, body: (op: OperationHandle) => T, options?: OperationOptions): T;
export function operation(first: unknown, second?: unknown, third?: unknown): unknown {
  if (typeof first === "string") {
    if (first === "") throw new InvalidArgumentError("name", "operation(name, body): name must not be empty");
    if (typeof second !== "function") {
      throw new InvalidArgumentError("body", "operation(name, body): body must be a function");
    }
    return runOperation({ ...checkOptions(third), name: first }, second as AnyFn, (op) => [op]);
  }
  if (typeof first !== "function") {
    throw new InvalidArgumentError("fn", "operation() takes a function, or a name and a body function");
  }
  const ctx = second as Partial<MethodDecoratorContext> | undefined;
  const options: OperationOptions =
    ctx && ctx.kind === "method" ? { name: String(ctx.name) } : checkOptions(second);
  return wrap(first as AnyFn, options);
}

function checkOptions(value: unknown): OperationOptions {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError("options", "must be an object");
  }
  const o = value as Record<string, unknown>;
  if (o.name !== undefined && (typeof o.name !== "string" || o.name === "")) {
    throw new InvalidArgumentError("options.name", "must be a non-empty string");
  }
  if (o.input !== undefined && (typeof o.input !== "object" || o.input === null || Array.isArray(o.input))) {
    throw new InvalidArgumentError("options.input", "must be an object of input values");
  }
  if (o.tracer !== undefined && !LightningTracer.isInstance(o.tracer)) {
    throw new InvalidArgumentError("options.tracer", "must be a LightningTracer");
  }
  return o as OperationOptions;
}

function wrap(fn: AnyFn, options: OperationOptions): AnyFn {
  const name = options.name ?? (fn.name || "anonymous");
  const params = parameterNames(fn);
  const wrapped = function (this: unknown, ...args: unknown[]) {
    const input: Record<string, unknown> = {};
    if (params && args.length <= params.length) {
      for (const [i, a] of args.entries()) input[params[i]!] = a;
    } else input.args = args;
    return runOperation(
      { ...options, name, input },
      () => fn.apply(this, args),
      () => [] as [],
    );
  };
  Object.defineProperty(wrapped, "name", { value: fn.name });
  return wrapped;
}

function runOperation<A extends unknown[]>(
  options: OperationOptions & { name: string },
  body: (...args: A) => unknown,
  argsFor: (op: OperationHandle) => A,
): unknown {
  const tracer = options.tracer ?? currentFrame()?.trace.tracer ?? defaultTracer();
  const span = tracer.startSpan(SPAN_NAMES.operation, { attributes: { [ATTR.operationName]: options.name } });
  const op: OperationHandle = {
    span,
    setInput: (values) => span.setAttributes(flattenAttributes(values, ATTR.operationInput, "stringify")),
    setOutput: (value) => span.setAttributes(flattenAttributes(value, ATTR.operationOutput, "stringify")),
    setAttributes: (values) => span.setAttributes(flattenAttributes(values, "", "stringify")),
  };
  if (options.input) op.setInput(options.input);
  const fail = (error: unknown) => {
    const err = error instanceof Error ? error : new Error(String(error));
    span.recordException(err);
    span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
    span.end();
  };
  const succeed = (value: unknown) => {
    if (value !== undefined) op.setOutput(value);
    span.end();
  };
  let result: unknown;
  try {
    result = tracer.withParent(span, () => body(...argsFor(op)));
  } catch (error) {
    fail(error);
    throw error;
  }
  if (result instanceof Promise) {
    return result.then(
      (value) => {
        succeed(value);
        return value;
      },
      (error) => {
        fail(error);
        throw error;
      },
    );
  }
  succeed(result);
  return result;
}

/**
 * Simple parameter names read from the function's source; null when any parameter is destructured,
 * defaulted or a rest parameter (the caller then records positional `args.<i>`).
 */
export function parameterNames(fn: AnyFn): string[] | null {
  const src = Function.prototype.toString.call(fn);
  const arrow = /^(?:async\s+)?([A-Za-z_$][\w$]*)\s*=>/.exec(src);
  if (arrow) return [arrow[1]!];
  const match = /^[^(]*\(([^)]*)\)/.exec(src);
  if (!match) return null;
  const names = match[1]!
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  return names.every((n) => /^[A-Za-z_$][\w$]*$/.test(n)) ? names : null;
}
