// The periodic sweep's reports (src/kernel/periodic-sweep.ts): a failing streak is reported once
// per kind of failure, its end once, and stop() waits for the run in progress; a sweep's batches
// let the event loop through between two.
import { describe, expect, it } from 'vitest';
import { inBatches, startPeriodicSweep } from '../../src/kernel/periodic-sweep.js';
import { eventually } from '../helpers/eventually.js';

const failure = (code: string | undefined, message = 'failed') => Object.assign(new Error(message), code === undefined ? {} : { code });
// As a query builder wraps its driver's error.
const wrapped = (code: string) => Object.assign(new Error('Failed query: select 1'), { cause: failure(code) });

describe('startPeriodicSweep', () => {
  it('reports the first failure of each kind in a streak, and the streak’s end once', async () => {
    const script: Array<Error | null> = [
      failure('ECONNREFUSED'),
      failure('ECONNREFUSED'),
      wrapped('ECONNREFUSED'),
      wrapped('57P01'),
      wrapped('57P01'),
      failure('ECONNREFUSED'),
      wrapped('57P01'),
      failure(undefined, 'no code'),
      failure(undefined, 'no code'),
      null,
      null,
      failure('ECONNREFUSED'),
      null,
      // Messages that differ at every run, without a code: reported up to a bound.
      ...Array.from({ length: 12 }, (_, i) => failure(undefined, `varies ${i}`)),
      null,
    ];
    const events: string[] = [];
    let runs = 0;
    const sweep = startPeriodicSweep({
      intervalMs: 2,
      async run() {
        const next = script[runs++];
        if (next) throw next;
      },
      onError: (error) => {
        const e = error as { code?: string; cause?: { code?: string }; message: string };
        events.push(`error ${e.code ?? e.cause?.code ?? e.message}`);
      },
      onRecovered: () => events.push('recovered'),
    });
    try {
      await eventually(() => expect(runs).toBeGreaterThanOrEqual(script.length));
    } finally {
      await sweep.stop();
    }
    expect(events).toEqual([
      'error ECONNREFUSED',
      'error 57P01',
      'error no code',
      'recovered',
      'error ECONNREFUSED',
      'recovered',
      ...Array.from({ length: 8 }, (_, i) => `error varies ${i}`),
      'recovered',
    ]);
  });

  it('stop() waits for the run in progress, which sees stopping(), and no run follows', async () => {
    let release!: () => void;
    let sawStopping = false;
    let runs = 0;
    const sweep = startPeriodicSweep({
      intervalMs: 1,
      async run(stopping) {
        runs++;
        await new Promise<void>((resolve) => (release = resolve));
        sawStopping = stopping();
      },
      onError: () => undefined,
    });
    await eventually(() => expect(runs).toBe(1));
    const stopped = sweep.stop();
    let done = false;
    void stopped.then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(done).toBe(false);
    release();
    await stopped;
    expect(sawStopping).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs).toBe(1);
  });
});

describe('inBatches', () => {
  // Batches that settle without I/O, as a statement on PGlite does: only the yield between two lets
  // a timer (a request, a socket's ping) run before the last.
  it('runs batches until one is not full, the event loop let through between two', async () => {
    const rows = [5, 5, 5, 2];
    const sizes: number[] = [];
    let firedAt = Infinity;
    let batches = 0;
    // Queued before the first batch: it runs at the first turn of the loop, the first yield.
    setImmediate(() => (firedAt = batches));
    const total = await inBatches(5, async (size) => {
      sizes.push(size);
      batches++;
      return rows.shift() ?? 0;
    });
    expect(total).toBe(17);
    expect(sizes).toEqual([5, 5, 5, 5]);
    expect(firedAt).toBeLessThan(4);
  });

  it('stops between batches once stopping() says so', async () => {
    let batches = 0;
    const total = await inBatches(
      3,
      async (size) => {
        batches++;
        return size;
      },
      () => batches >= 2,
    );
    expect([batches, total]).toEqual([2, 6]);
  });
});
