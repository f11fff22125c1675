// An error and its causes, outermost first: a query builder wraps its driver's error, which is on
// `cause`. A cause that comes back round ends the chain.
export function* causeChain(error: unknown): Generator<object> {
  const seen = new Set<unknown>();
  for (let e = error; typeof e === 'object' && e !== null && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    yield e;
  }
}
