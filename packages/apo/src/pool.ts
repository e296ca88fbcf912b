/** `fn` over `items`, at most `limit` at a time, results in input order. */
export async function mapPool<I, R>(
  items: readonly I[],
  limit: number,
  fn: (item: I, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
