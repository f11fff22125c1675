// The replica's host name lookups taking turns: FairSlots' rules for every sequence of arrivals,
// ends and withdrawals, and targetLookups' sharing and time limit over a resolver the test holds.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FairSlots, LookupTimedOut, targetLookups } from '../../src/events/target-lookups.js';
import type { ResolvedAddress } from '../../src/events/target-rules.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Held {
  key: string;
  n: number;
  finish(): void;
}

// FairSlots with tasks that end when the test says, and the order in which they started.
function heldSlots(slots: number, perKey: number) {
  const fair = new FairSlots(slots, perKey);
  const running: Held[] = [];
  const startedOrder: Array<{ key: string; n: number }> = [];
  let made = 0;
  const schedule = (key: string) => {
    const n = made++;
    const scheduled = fair.schedule(key, () => {
      startedOrder.push({ key, n });
      return new Promise<void>((resolve) => running.push({ key, n, finish: resolve }));
    });
    void scheduled.result.catch(() => undefined);
    return { n, ...scheduled };
  };
  return { fair, running, startedOrder, schedule };
}

describe('FairSlots', () => {
  it('serves the keys in turn: a key that starts a task goes behind every key that waits', async () => {
    const { running, startedOrder, schedule } = heldSlots(1, 1);
    for (let i = 0; i < 4; i++) schedule('busy');
    schedule('quiet');
    schedule('third');
    schedule('quiet');
    await turn();
    const order = async () => {
      while (running.length > 0) {
        running.shift()!.finish();
        await turn();
      }
    };
    await order();
    expect(startedOrder.map((s) => s.key)).toEqual(['busy', 'quiet', 'third', 'busy', 'quiet', 'busy', 'busy']);
  });

  it('runs no more than its slots, nor a key more than its share, and never leaves a slot idle that a waiting key may take', async () => {
    const keys = ['a', 'b', 'c', 'd'];
    const step = fc.oneof(
      fc.record({ op: fc.constant('schedule' as const), key: fc.constantFrom(...keys) }),
      fc.record({ op: fc.constant('finish' as const), at: fc.nat() }),
      fc.record({ op: fc.constant('withdraw' as const), at: fc.nat() }),
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.array(step, { maxLength: 60 }), async (slots, perKey, steps) => {
        const { fair, running, startedOrder, schedule } = heldSlots(slots, perKey);
        const waiting: Array<ReturnType<typeof schedule> & { key: string }> = [];
        const withdrawn = new Set<number>();
        const scheduledOrder: Array<{ key: string; n: number }> = [];
        for (const s of steps) {
          if (s.op === 'schedule') {
            const scheduled = schedule(s.key);
            waiting.push({ ...scheduled, key: s.key });
            scheduledOrder.push({ key: s.key, n: scheduled.n });
          } else if (s.op === 'finish' && running.length > 0) {
            running.splice(s.at % running.length, 1)[0]!.finish();
          } else if (s.op === 'withdraw' && waiting.length > 0) {
            const [w] = waiting.splice(s.at % waiting.length, 1);
            const started = startedOrder.some((x) => x.n === w!.n);
            expect(w!.withdraw()).toBe(!started);
            if (!started) withdrawn.add(w!.n);
          }
          await turn();
          const counts = fair.counts();
          expect(counts.running).toBe(running.length);
          expect(counts.running).toBeLessThanOrEqual(slots);
          for (const key of keys) expect(running.filter((r) => r.key === key).length).toBeLessThanOrEqual(perKey);
          // Work-conserving: a free slot means no waiting key may take it.
          const notStarted = scheduledOrder.filter((x) => !withdrawn.has(x.n) && !startedOrder.some((y) => y.n === x.n));
          expect(counts.waiting).toBe(notStarted.length);
          if (counts.running < slots) {
            for (const x of notStarted) expect(running.filter((r) => r.key === x.key).length).toBe(perKey);
          }
        }
        // Within a key, tasks start in the order they came.
        for (const key of keys) {
          const started = startedOrder.filter((x) => x.key === key).map((x) => x.n);
          expect(started).toEqual([...started].sort((p, q) => p - q));
        }
        // Once everything running ends, every task not withdrawn starts.
        while (running.length > 0) {
          running.shift()!.finish();
          await turn();
        }
        expect(startedOrder.length + withdrawn.size).toBe(scheduledOrder.length);
      }),
      { numRuns: 200 },
    );
  });

  it('a task that throws or rejects gives its slot back', async () => {
    const fair = new FairSlots(1, 1);
    await expect(fair.schedule('a', () => { throw new Error('at once'); }).result).rejects.toThrow('at once');
    await expect(fair.schedule('a', () => Promise.reject(new Error('later'))).result).rejects.toThrow('later');
    await expect(fair.schedule('a', () => Promise.resolve(7)).result).resolves.toBe(7);
    expect(fair.counts()).toMatchObject({ running: 0, waiting: 0 });
  });
});

describe('targetLookups', () => {
  const address: ResolvedAddress[] = [{ address: '93.184.215.14', family: 4 }];

  it('lookups of one name at once share one, whichever networks asked; a lookup past its time limit fails with LookupTimedOut and one nobody waits for any more gives its turn up', async () => {
    const started: string[] = [];
    const answers: Array<() => void> = [];
    const lookups = targetLookups(
      (hostname) => {
        started.push(hostname);
        return new Promise((resolve) => answers.push(() => resolve(address)));
      },
      { slots: 1, perNetwork: 1 },
    );
    const one = lookups.forNetwork('net_a', 5_000)('same.example.com');
    const two = lookups.forNetwork('net_b', 5_000)('same.example.com');
    // Waits behind same.example.com for the one slot, and gives up first.
    const late = lookups.forNetwork('net_c', 50)('late.example.com');
    await expect(late).rejects.toBeInstanceOf(LookupTimedOut);
    expect(lookups.counts()).toMatchObject({ running: 1, waiting: 0 });
    answers.shift()!();
    await expect(Promise.all([one, two])).resolves.toEqual([address, address]);
    expect(started).toEqual(['same.example.com']);
    const next = lookups.forNetwork(null, 5_000)('next.example.com');
    await turn();
    answers.shift()!();
    await expect(next).resolves.toEqual(address);
    expect(started).toEqual(['same.example.com', 'next.example.com']);
  });
});
