import { causeChain } from './error-causes.js';

// Work a replica does every `intervalMs` while it runs (the outbox's retention, recording changes
// whose replica died): the first run at a random point of the first interval, not at start-up,
// where it would compete with everything else, and so that replicas started together do not run
// together. A run that throws is reported to `onError` and the next one tries again; while runs go
// on failing, only the first failure of each kind is reported (a database that does not answer
// fails every run the same way, or two ways in turn), up to MAX_KINDS_REPORTED, and `onRecovered`
// is called once one succeeds again. `stop()` waits for a run in progress, which may ask `stopping()`
// to end early.
export interface PeriodicSweep {
  stop(): Promise<void>;
}

// Failures whose messages vary from run to run (and carry no code) would otherwise be reported at
// every run.
const MAX_KINDS_REPORTED = 8;

export function startPeriodicSweep(options: {
  intervalMs: number;
  run: (stopping: () => boolean) => Promise<void>;
  onError: (error: unknown) => void;
  onRecovered?: () => void;
}): PeriodicSweep {
  const { intervalMs, run, onError, onRecovered } = options;
  let stopped = false;
  // The kinds of failure (code, else message) reported in the current failing streak; empty: not
  // failing.
  const reported = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();

  async function sweep(): Promise<void> {
    try {
      await run(() => stopped);
      if (reported.size > 0) onRecovered?.();
      reported.clear();
    } catch (error) {
      const kind = kindOf(error);
      if (!reported.has(kind) && reported.size < MAX_KINDS_REPORTED) {
        reported.add(kind);
        onError(error);
      }
    }
    if (!stopped) sweepIn(intervalMs);
  }

  function sweepIn(ms: number): void {
    timer = setTimeout(() => (running = sweep()), ms).unref();
  }

  sweepIn(Math.random() * intervalMs);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

// A sweep's work in batches of `size` (`batch` does one, its own statement or transaction, and
// says how many rows it took) until one is not full or `stopping()`: the event loop let through
// between two, since a sweep after an outage or an upgrade may find thousands of rows, and on
// PGlite every statement runs on the process's own thread. Returns the rows taken in all.
export async function inBatches(size: number, batch: (size: number) => Promise<number>, stopping: () => boolean = () => false): Promise<number> {
  let total = 0;
  for (let full = true; full && !stopping(); ) {
    const n = await batch(size);
    total += n;
    full = n === size;
    if (full) await new Promise((resolve) => setImmediate(resolve));
  }
  return total;
}

// Two failures are of one kind when they have the same code (a SQLSTATE, ECONNREFUSED; a
// wrapped error's, as a query builder's around its driver's), or, without one, the same message.
function kindOf(error: unknown): string {
  for (const e of causeChain(error)) {
    const { code } = e as { code?: unknown };
    if (typeof code === 'string' || typeof code === 'number') return `code:${code}`;
  }
  const { message } = (error ?? {}) as { message?: unknown };
  return `message:${typeof message === 'string' ? message : String(error)}`;
}
