// Work a replica does every `intervalMs` while it runs (the outbox's retention, recording changes
// whose replica died): the first run at a random point of the first interval, not at start-up,
// where it would compete with everything else, and so that replicas started together do not run
// together. A run that throws is reported to `onError` and the next one tries again; while runs go
// on failing (a database that does not answer) only the first is reported, and `onRecovered` is
// called once one succeeds again. `stop()` waits for a run in progress, which may ask `stopping()`
// to end early.
export interface PeriodicSweep {
  stop(): Promise<void>;
}

export function startPeriodicSweep(options: {
  intervalMs: number;
  run: (stopping: () => boolean) => Promise<void>;
  onError: (error: unknown) => void;
  onRecovered?: () => void;
}): PeriodicSweep {
  const { intervalMs, run, onError, onRecovered } = options;
  let stopped = false;
  let failing = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();

  async function sweep(): Promise<void> {
    try {
      await run(() => stopped);
      if (failing) onRecovered?.();
      failing = false;
    } catch (error) {
      if (!failing) onError(error);
      failing = true;
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
