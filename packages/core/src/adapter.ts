/**
 * Turns one representation into another, typically a rollout's spans into training data (triplets,
 * messages). `@agl/adapter` implements it; algorithms receive one through the Trainer.
 */
export interface Adapter<From, To> {
  adapt(input: From): To;
}

export function isAdapter(value: unknown): value is Adapter<unknown, unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Adapter<unknown, unknown>).adapt === "function"
  );
}
