// Many small statements as few large ones, without making a lone one wait. Items queue while the
// batch before them runs; the next batch forms when it gets its turn and takes what has queued by
// then. So in a quiet moment each item goes alone at once, and a burst (a reconnect storm:
// thousands of logins, claims and boots) goes in a few statements instead of thousands, each of
// which would have taken a pooled connection, a round trip and a commit.

export interface BatcherOptions<I, O> {
  // Most items one run() gets.
  maxSize: number;
  // Items with equal keys never share a run(): a batch holding one twice runs as consecutive
  // rounds, so a statement never touches the same row twice and equal keys keep their order.
  key?: (item: I) => string;
  // Runs one round; resolves with one result per item, in the items' order.
  run(items: I[]): Promise<O[]>;
  // Where a batch waits for its turn (a limit shared with other batchers). The batch takes its
  // items only when the task it is given starts.
  schedule?: <T>(task: () => Promise<T>) => Promise<T>;
}

export interface Batcher<I, O> {
  push(item: I): Promise<O>;
}

interface Entry<I, O> {
  item: I;
  resolve(result: O): void;
  reject(error: unknown): void;
}

// Splits items into rounds in which no key appears twice; the n-th item of a key goes in round n.
export function rounds<T>(items: T[], key: (item: T) => string): T[][] {
  const result: T[][] = [];
  const seen = new Map<string, number>();
  for (const item of items) {
    const k = key(item);
    const n = seen.get(k) ?? 0;
    seen.set(k, n + 1);
    (result[n] ??= []).push(item);
  }
  return result;
}

// One batch at a time per batcher: batches run in the order their items came.
export function createBatcher<I, O>(options: BatcherOptions<I, O>): Batcher<I, O> {
  if (!(options.maxSize >= 1)) throw new RangeError('maxSize must be at least 1');
  const schedule = options.schedule ?? ((task) => task());
  let queue: Array<Entry<I, O>> = [];
  let busy = false;

  async function runRound(round: Array<Entry<I, O>>): Promise<void> {
    let results: O[];
    try {
      results = await options.run(round.map((e) => e.item));
      if (results.length !== round.length) throw new Error(`a batch of ${round.length} returned ${results.length} results`);
    } catch (error) {
      for (const e of round) e.reject(error);
      return;
    }
    round.forEach((e, i) => e.resolve(results[i]!));
  }

  async function runBatch(): Promise<void> {
    const batch = queue.slice(0, options.maxSize);
    queue = queue.slice(batch.length);
    const key = options.key;
    for (const round of key ? rounds(batch, (e) => key(e.item)) : [batch]) await runRound(round);
  }

  function pump(): void {
    if (busy || queue.length === 0) return;
    busy = true;
    schedule(runBatch)
      // runRound settles every item itself; this only keeps a failing schedule from stalling.
      .catch((error: unknown) => {
        for (const e of queue.splice(0)) e.reject(error);
      })
      .finally(() => {
        busy = false;
        pump();
      });
  }

  return {
    push(item) {
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        pump();
      });
    },
  };
}
